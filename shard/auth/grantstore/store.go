package grantstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// Entry is a stored grant with its etcd key and revision.
type Entry struct {
	Key string
	// Grant's id is canonical (auth.CanonicalID), whatever its stored
	// form.
	Grant       auth.Grant
	ModRevision int64
	// legacy: stored before kinds, at the key of an id without a kind.
	legacy bool
}

// Invalid is a stored value that is not a valid grant.
type Invalid struct {
	Key string
	Err error
}

// ErrInternalInEtcd refuses the internal role to a grant stored in etcd:
// only the components' grants files (--grants-file) grant it, so that no
// Admin API caller (an operator) can make itself a caller of the shard API.
var ErrInternalInEtcd = fmt.Errorf("%w: role: internal is granted only by the components' grants file (--grants-file), never through etcd or the Admin API", auth.ErrInvalidGrant)

// decodeAt decodes a stored grant and checks that it is stored under its
// own identity's key (as written: an id without a kind at its own legacy
// key) and that it may be stored at all (not role internal). The entry's
// grant id is returned canonical (auth.CanonicalID).
func decodeAt(l etcd.Layout, key string, value []byte, modRev int64) (Entry, error) {
	g, err := auth.Decode(value)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", key, err)
	}
	if want := l.Grant(g.ID); want != key {
		return Entry{}, fmt.Errorf("%s: %w: id: the grant of %q belongs at %s", key, auth.ErrInvalidGrant, g.ID, want)
	}
	if g.Role == auth.RoleInternal {
		return Entry{}, fmt.Errorf("%s: %w", key, ErrInternalInEtcd)
	}
	_, _, explicit := auth.ParseID(g.ID)
	g.ID = auth.CanonicalID(g.ID)
	return Entry{Key: key, Grant: g, ModRevision: modRev, legacy: !explicit}, nil
}

// resolve returns the entries in key order but for a grant stored before
// kinds (at its legacy key) whose identity also has a grant at its
// canonical key: that one wins and the legacy key is listed as invalid.
func resolve(l etcd.Layout, entries []Entry) (kept []Entry, invalid []Invalid) {
	explicit := map[string]bool{}
	for _, e := range entries {
		if !e.legacy {
			explicit[e.Grant.ID] = true
		}
	}
	for _, e := range entries {
		if e.legacy && explicit[e.Grant.ID] {
			invalid = append(invalid, Invalid{Key: e.Key, Err: fmt.Errorf("%s: %w: id: %s holds the grant of this identity; delete this key", e.Key, auth.ErrInvalidGrant, l.Grant(e.Grant.ID))})
			continue
		}
		kept = append(kept, e)
	}
	return kept, invalid
}

// List reads every stored grant, sorted by key, ids canonical.
func List(ctx context.Context, cli *clientv3.Client, l etcd.Layout) (entries []Entry, invalid []Invalid, rev int64, err error) {
	resp, err := cli.Get(ctx, l.Grants(), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, 0, err
	}
	for _, kv := range resp.Kvs {
		e, err := decodeAt(l, string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			invalid = append(invalid, Invalid{Key: string(kv.Key), Err: err})
			continue
		}
		entries = append(entries, e)
	}
	entries, dups := resolve(l, entries)
	invalid = append(invalid, dups...)
	slices.SortFunc(invalid, func(a, b Invalid) int { return strings.Compare(a.Key, b.Key) })
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
// writes it in a transaction that succeeds only if the stored values did
// not change since they were read. It retries a few times on a conflict,
// then gives up with ErrConflict. A grant to store is validated first, and
// refused the internal role (ErrInternalInEtcd); an error of f or of
// validation writes nothing. It returns the etcd revision after the write.
//
// id may name its kind or not (auth.ParseID); the grant is always written
// at its canonical key (uri:..., dns:..., token:...), and a grant of the
// same identity stored before kinds, at its legacy key, is read when no
// canonical one is stored and deleted by the write: every change migrates
// the grant it changes.
func Modify(ctx context.Context, cli *clientv3.Client, l etcd.Layout, id string, f func(current *auth.Grant) (Change, error)) (int64, error) {
	if err := auth.CheckID(id); err != nil {
		return 0, err
	}
	cid := auth.CanonicalID(id)
	keys := []string{l.Grant(cid)}
	if kind, name, _ := auth.ParseID(cid); kind != auth.KindDNS {
		if k, _, explicit := auth.ParseID(name); !explicit && k == kind {
			keys = append(keys, l.Grant(name)) // where it was stored before kinds
		}
	}
	for range 5 {
		var current *auth.Grant
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, key := range keys {
			resp, err := cli.Get(ctx, key)
			if err != nil {
				return 0, err
			}
			var modRev int64
			if len(resp.Kvs) == 1 {
				kv := resp.Kvs[0]
				modRev = kv.ModRevision
				if e, err := decodeAt(l, key, kv.Value, modRev); err == nil && current == nil {
					current = &e.Grant
				}
				if key != keys[0] {
					ops = append(ops, clientv3.OpDelete(key))
				}
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", modRev))
		}
		change, err := f(current)
		if err != nil {
			return 0, err
		}
		if change.Delete {
			ops = append(ops, clientv3.OpDelete(keys[0]))
		} else {
			g := change.Grant
			if auth.CanonicalID(g.ID) != cid {
				return 0, fmt.Errorf("%w: id: %q is not the identity being updated", auth.ErrInvalidGrant, g.ID)
			}
			g.ID = cid
			if err := g.Validate(); err != nil {
				return 0, err
			}
			if g.Role == auth.RoleInternal {
				return 0, ErrInternalInEtcd
			}
			b, err := auth.Encode(g)
			if err != nil {
				return 0, err
			}
			ops = append(ops, clientv3.OpPut(keys[0], string(b)))
		}
		tr, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
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
	// Grants are the valid stored grants, sorted by key, ids canonical.
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
	d := etcd.NewDecoded(func(key string, value []byte) (Entry, error) { return decodeAt(l, key, value, 0) },
		func(key string, err error, _ bool) {
			log.Error("ignoring an invalid grant in etcd: its identity is refused until it is fixed", "key", key, "err", err)
		},
		func(valid []Entry, invalid []string, rev int64) {
			kept, dups := resolve(l, valid)
			u := Update{Invalid: invalid, Revision: rev}
			for _, d := range dups {
				log.Error("ignoring a grant stored before kinds: its identity's canonical key holds its grant", "err", d.Err)
				u.Invalid = append(u.Invalid, d.Key)
			}
			slices.Sort(u.Invalid)
			for _, e := range kept {
				u.Grants = append(u.Grants, e.Grant)
			}
			onChange(u)
		})
	etcd.Follow(ctx, cli, etcd.Target{Name: "grants", Key: l.Grants(), Prefix: true}, log, d)
}

// probeEvery is how often Follow checks that the grants in force still
// match etcd, for the last-sync metric.
var probeEvery = 5 * time.Second

// synced is what the grants in force reflect: the revision of the last
// list or watch response of the grants prefix, and how many keys it held.
type synced struct {
	rev  int64
	keys int
}

// matches reports whether grants that reflect s match a read of the
// prefix that found keys keys, the newest written at maxModRev. A follower
// that missed a write sees a key newer than its revision; one that missed
// a delete, one key too many. One that is ahead of the read (an event
// after it) does not match this time, but its event counted as a sync.
func (s synced) matches(keys int, maxModRev int64) bool {
	return s.keys == keys && s.rev >= maxModRev
}

// Follow keeps the grants of a in force: file first (they win), then the
// valid stored ones, replaced after every change in etcd, until watchCtx
// ends. It returns once the first list is in force, or with ctx's error if
// ctx ends first, so that a server serves no one before it knows its
// grants.
//
// Every change, and every probeEvery a read of the grants' keys that finds
// what is in force, marks the grants synced (Authorizer.GrantsSynced): a
// component cut off from etcd keeps its last grants (a revoked token still
// works there) and its last-sync metric tells how long.
func Follow(ctx, watchCtx context.Context, cli *clientv3.Client, l etcd.Layout, log *slog.Logger, a *auth.Authorizer, file []auth.Grant) error {
	first := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var state synced
	go Watch(watchCtx, cli, l, log, func(u Update) {
		a.SetGrants(auth.NewSet(file, u.Grants), len(u.Invalid))
		mu.Lock()
		state = synced{rev: u.Revision, keys: len(u.Grants) + len(u.Invalid)}
		mu.Unlock()
		a.GrantsSynced(time.Now())
		log.Info("grants loaded", "identities", a.Grants().Len(), "invalid", len(u.Invalid), "revision", u.Revision)
		once.Do(func() { close(first) })
	})
	every := probeEvery
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-t.C:
			}
			pctx, cancel := context.WithTimeout(watchCtx, every)
			resp, err := cli.Get(pctx, l.Grants(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
			cancel()
			if err != nil {
				continue // the metric ages; etcd's own health is logged elsewhere
			}
			var maxModRev int64
			for _, kv := range resp.Kvs {
				maxModRev = max(maxModRev, kv.ModRevision)
			}
			mu.Lock()
			ok := state.matches(len(resp.Kvs), maxModRev)
			mu.Unlock()
			if ok {
				a.GrantsSynced(time.Now())
			}
		}
	}()
	select {
	case <-first:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the grants from etcd: %w", ctx.Err())
	}
}
