package grantstore

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/poll"
)

var etcdEndpoint string

func TestMain(m *testing.M) { os.Exit(embedded.RunTests(m, &etcdEndpoint)) }

// Modify validates before it writes; List and Watch leave out values that
// are not valid grants, or are stored under another identity's key.
func TestStoreAndFollow(t *testing.T) {
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := etcd.Layout("/test/grantstore/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := func(g auth.Grant) error {
		_, err := Modify(ctx, cli, l, g.ID, func(*auth.Grant) (Change, error) { return Change{Grant: g}, nil })
		return err
	}
	if err := set(auth.Grant{ID: "shop", Role: "boss"}); !errors.Is(err, auth.ErrInvalidGrant) || !strings.Contains(err.Error(), "role:") {
		t.Fatalf("an invalid grant: %v", err)
	}
	if err := set(auth.Grant{ID: "shop", Role: auth.RoleService, Services: []string{"shop"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Modify(ctx, cli, l, "shop", func(*auth.Grant) (Change, error) {
		return Change{Grant: auth.Grant{ID: "other", Role: auth.RoleOperator}}, nil
	}); !errors.Is(err, auth.ErrInvalidGrant) {
		t.Fatalf("a grant of another id under shop's key: %v", err)
	}
	// Written around Modify: a value stored under another's key, and one
	// that is not YAML.
	if _, err := cli.Put(ctx, l.Grant("thief"), "id: shop\nrole: operator\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, l.Grant("junk"), "{"); err != nil {
		t.Fatal(err)
	}
	entries, invalid, _, err := List(ctx, cli, l)
	if err != nil || len(entries) != 1 || entries[0].Grant.ID != "shop" || len(invalid) != 2 {
		t.Fatalf("list: %v %v %v", entries, invalid, err)
	}
	var got Update
	updates := make(chan Update, 10)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go Watch(wctx, cli, l, slog.New(slog.DiscardHandler), func(u Update) { updates <- u })
	got = <-updates
	if len(got.Grants) != 1 || len(got.Invalid) != 2 {
		t.Fatalf("first update: %+v", got)
	}
	// A grant that turns invalid is gone at once: no last valid value.
	if _, err := cli.Put(ctx, l.Grant("shop"), "id: shop\nrole: service\n"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		select {
		case got = <-updates:
		default:
		}
		if len(got.Grants) != 0 || len(got.Invalid) != 3 {
			return errors.New("the invalid grant is still in force")
		}
		return nil
	})
}
