package membership_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/logtest"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// etcd down for longer than the TTL, then restarted on the same data: it
// restores the member's lease, and the member keeps it instead of
// registering anew, so the record is never deleted (its create revision
// stays) and no router ever sees the member go.
func TestLeaseKeptAcrossEtcdRestart(t *testing.T) {
	dir := t.TempDir()
	e, err := embedded.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := e.Endpoint()
	defer func() { e.Close() }()
	cli, err := etcd.Dial([]string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	layout := etcd.Layout("/resume/")
	logs := &logtest.Buffer{}
	// Room for a loaded machine to reconnect within the restored lease:
	// etcd restarts slowly under load, and the client's reconnect backoff
	// after seconds of failures is itself seconds long.
	const ttl = 10 * time.Second
	reg, err := membership.Register(t.Context(), cli, layout, member.Member{ID: "a", Addr: "127.0.0.1:1"}, ttl, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Close(context.Background()) }()
	created := createRevision(t, cli, layout.Member("a"))
	// While etcd answers, the lease is confirmed ahead, by at most a TTL.
	if until := reg.ConfirmedUntil(); !until.After(time.Now()) || until.After(time.Now().Add(ttl)) {
		t.Errorf("confirmed until %v, want within a TTL ahead of now (%v)", until, time.Now())
	}
	if reg.LastAnswered().IsZero() {
		t.Error("etcd never answered, by LastAnswered")
	}

	e.Close() // takes several seconds: it drains the member's streams
	stopped := time.Now()
	// The fault lasts past the TTL, so the member's keep-alives end.
	time.Sleep(ttl + 1500*time.Millisecond)
	// No keep-alive was answered since: the lease is no longer confirmed.
	if until := reg.ConfirmedUntil(); until.After(time.Now()) {
		t.Errorf("confirmed until %v with etcd down for over a TTL", until)
	}
	if last := reg.LastAnswered(); last.After(stopped) {
		t.Errorf("etcd last answered at %v, after it stopped at %v", last, stopped)
	}
	if e, err = embedded.Start(dir, addr); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if !strings.Contains(logs.String(), "membership lease kept") {
			return errors.New("no \"membership lease kept\" logged:\n" + logs.String())
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		if !reg.LastAnswered().After(stopped) || !reg.ConfirmedUntil().After(time.Now()) {
			return fmt.Errorf("last answered %v, confirmed until %v after etcd's return", reg.LastAnswered(), reg.ConfirmedUntil())
		}
		return nil
	})
	// The restored lease would have expired a TTL after the restart: watch
	// past that.
	time.Sleep(ttl + time.Second)
	if got := createRevision(t, cli, layout.Member("a")); got != created {
		t.Fatalf("record created again (revision %d, was %d): the member was dropped\n%s", got, created, logs.String())
	}
	if strings.Contains(logs.String(), "registering again") {
		t.Errorf("the member registered anew:\n%s", logs.String())
	}
}

// createRevision returns the create revision of key, which changes when the
// key is deleted and written again; 0 when it does not exist.
func createRevision(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].CreateRevision
}
