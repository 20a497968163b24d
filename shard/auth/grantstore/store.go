package grantstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// Entry is a stored grant with its etcd key and revision.
type Entry struct {
	Key         string
	Grant       auth.Grant
	ModRevision int64
}

// Invalid is a stored value that is not a valid grant.
type Invalid struct {
	Key string
	Err error
}

// decodeAt decodes a stored grant and checks that it is stored under its
// own identity's key.
func decodeAt(l etcd.Layout, key string, value []byte) (auth.Grant, error) {
	g, err := auth.Decode(value)
	if err != nil {
		return g, fmt.Errorf("%s: %w", key, err)
	}
	if want := l.Grant(g.ID); want != key {
		return g, fmt.Errorf("%s: %w: id: the grant of %q belongs at %s", key, auth.ErrInvalidGrant, g.ID, want)
	}
	return g, nil
}

// List reads every stored grant, sorted by key.
func List(ctx context.Context, cli *clientv3.Client, l etcd.Layout) (entries []Entry, invalid []Invalid, rev int64, err error) {
	resp, err := cli.Get(ctx, l.Grants(), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, 0, err
	}
	for _, kv := range resp.Kvs {
		g, err := decodeAt(l, string(kv.Key), kv.Value)
		if err != nil {
			invalid = append(invalid, Invalid{Key: string(kv.Key), Err: err})
			continue
		}
		entries = append(entries, Entry{Key: string(kv.Key), Grant: g, ModRevision: kv.ModRevision})
	}
	return entries, invalid, resp.Header.Revision, nil
}

// ErrConflict means the grant kept changing while Modify tried to change
// it; nothing was written.
var ErrConflict = errors.New("the grant changed in etcd while it was being updated; nothing was written, try again")

// ErrNotFound is returned by an update function when the grant it needs
// does not exist.
var ErrNotFound = errors.New("no such grant")

// Change is what an update function decides: the grant to store, or
// Delete.
type Change struct {
	Grant  auth.Grant
	Delete bool
}

// Modify reads the grant of id (current is nil when none is stored, or when
// the stored value is not a valid grant), lets f decide the change, and
// writes it in a transaction that succeeds only if the stored value did
// not change since it was read. It retries a few times on a conflict, then
// gives up with ErrConflict. A grant to store is validated first; an error
// of f or of validation writes nothing. It returns the etcd revision after
// the write.
func Modify(ctx context.Context, cli *clientv3.Client, l etcd.Layout, id string, f func(current *auth.Grant) (Change, error)) (int64, error) {
	if err := auth.CheckID(id); err != nil {
		return 0, err
	}
	key := l.Grant(id)
	for range 5 {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return 0, err
		}
		var current *auth.Grant
		var modRev int64
		if len(resp.Kvs) == 1 {
			modRev = resp.Kvs[0].ModRevision
			if g, err := decodeAt(l, key, resp.Kvs[0].Value); err == nil {
				current = &g
			}
		}
		change, err := f(current)
		if err != nil {
			return 0, err
		}
		var op clientv3.Op
		if change.Delete {
			op = clientv3.OpDelete(key)
		} else {
			if change.Grant.ID != id {
				return 0, fmt.Errorf("%w: id: %q is not the identity being updated", auth.ErrInvalidGrant, change.Grant.ID)
			}
			if err := change.Grant.Validate(); err != nil {
				return 0, err
			}
			b, err := auth.Encode(change.Grant)
			if err != nil {
				return 0, err
			}
			op = clientv3.OpPut(key, string(b))
		}
		cmp := clientv3.Compare(clientv3.ModRevision(key), "=", modRev)
		tr, err := cli.Txn(ctx).If(cmp).Then(op).Commit()
		if err != nil {
			return 0, err
		}
		if tr.Succeeded {
			return tr.Header.Revision, nil
		}
	}
	return 0, ErrConflict
}

// Update is what Watch reports after every change.
type Update struct {
	// Grants are the valid stored grants, sorted by key.
	Grants []auth.Grant
	// Invalid lists the keys whose value is not a valid grant now.
	Invalid []string
	// Revision is the etcd revision the update reflects.
	Revision int64
}

// Watch lists the grants and calls onChange with every valid one, first
// once listed and then after every change, until ctx ends. While etcd is
// unreachable the last grants stay in force.
func Watch(ctx context.Context, cli *clientv3.Client, l etcd.Layout, log *slog.Logger, onChange func(Update)) {
	d := etcd.NewDecoded(func(key string, value []byte) (auth.Grant, error) { return decodeAt(l, key, value) },
		func(key string, err error, _ bool) {
			log.Error("ignoring an invalid grant in etcd: its identity is refused until it is fixed", "key", key, "err", err)
		},
		func(valid []auth.Grant, invalid []string, rev int64) {
			onChange(Update{Grants: valid, Invalid: invalid, Revision: rev})
		})
	etcd.Follow(ctx, cli, etcd.Target{Name: "grants", Key: l.Grants(), Prefix: true}, log, d)
}

// Follow keeps the grants of a in force: file first (they win), then the
// valid stored ones, replaced after every change in etcd, until watchCtx
// ends. It returns once the first list is in force, or with ctx's error if
// ctx ends first, so that a server serves no one before it knows its
// grants.
func Follow(ctx, watchCtx context.Context, cli *clientv3.Client, l etcd.Layout, log *slog.Logger, a *auth.Authorizer, file []auth.Grant) error {
	first := make(chan struct{})
	var once sync.Once
	go Watch(watchCtx, cli, l, log, func(u Update) {
		a.SetGrants(auth.NewSet(file, u.Grants), len(u.Invalid))
		log.Info("grants loaded", "identities", a.Grants().Len(), "invalid", len(u.Invalid), "revision", u.Revision)
		once.Do(func() { close(first) })
	})
	select {
	case <-first:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the grants from etcd: %w", ctx.Err())
	}
}
