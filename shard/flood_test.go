package shard

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/key/keytest"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Two users whose placement hashes and whole 128-bit hashes are equal
// (true XXH64 collisions) keep counters of their own: the attacker's hits
// leave the victim's quota whole, in the store, through a batch with the
// router's placement hash, and through a hand-off.
func TestStoreCollidingKeysKeepTheirOwnCounters(t *testing.T) {
	victim, attacker := keytest.SameMake("svc", "r")
	if key.Make("svc", "r", victim) != key.Make("svc", "r", attacker) || victim == attacker {
		t.Fatal("not a collision")
	}
	r := tokenRule(3, time.Hour)
	s := NewStore(StoreOptions{}, t0)
	for range 10 {
		decide(s, attacker, t0, r, 1)
	}
	if d := decide(s, attacker, t0, r, 0); d.Remaining != 0 {
		t.Fatalf("attacker: %+v, want no quota left", d)
	}
	if d := decide(s, victim, t0, r, 1); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("victim after the attacker's 10 hits: %+v, want allowed with 2 left", d)
	}
	checks := batchChecks("svc", "r", []string{victim, attacker}, r, false)
	out := make([]limiter.Decision, 2)
	s.DecideBatch(checks, t0, 1, out)
	if !out[0].Allowed || out[0].Remaining != 1 || out[1].Allowed {
		t.Fatalf("batch: %+v, want the victim allowed with 1 left and the attacker denied", out)
	}
	// A hand-off carries both, each with its own state.
	moved := NewStore(StoreOptions{}, t0)
	p := uint32(key.Make("svc", "r", victim).Partition(1024))
	exported := exportAll(s, []uint32{p}, 1024)
	if imported, kept := moved.Import(exported, t0); len(exported) != 2 || imported != 2 || kept != 0 {
		t.Fatalf("hand-off of %d keys: %d imported, %d kept; want both imported", len(exported), imported, kept)
	}
	if d := decide(moved, victim, t0, r, 0); d.Remaining != 1 {
		t.Fatalf("victim after the hand-off: %+v, want 1 left", d)
	}
	if d := decide(moved, attacker, t0, r, 0); d.Remaining != 0 {
		t.Fatalf("attacker after the hand-off: %+v, want none left", d)
	}
	if s.Reset("svc", "r", attacker, t0); decide(s, victim, t0, r, 0).Remaining != 1 {
		t.Fatal("resetting the attacker reset the victim")
	}
}

// 60,000 users whose checks carry one placement hash and one partition (a
// flood of colliding names, as the audit sent them) spread over the
// store's stripes and slots as random users do: no stripe holds more than
// twice its share, a lookup probes less than 4 slots past its home on
// average and never past maxProbe, and every check is decided.
func TestStoreFloodOfOnePlacementSpreads(t *testing.T) {
	const n = 60_000
	s := NewStore(StoreOptions{}, t0)
	r := tokenRule(10, time.Hour)
	checks := batchChecks("svc", "r", users(n), r, true)
	out := make([]limiter.Decision, len(checks))
	s.DecideBatch(checks, t0, 1, out)
	for i, d := range out {
		if !d.Allowed || d.Remaining != 9 {
			t.Fatalf("check %d: %+v, want allowed with 9 left", i, d)
		}
	}
	if checks[0].Partition != checks[n-1].Partition {
		t.Fatal("the checks do not share a partition")
	}
	probes, longest, fullest := 0, 0, 0
	for i := range s.stripes {
		fullest = max(fullest, s.stripes[i].t.len())
	}
	for _, c := range checks {
		k := storedKey(nil, r.Algorithm, c.Service, c.Rule, c.User)
		h := s.hash(k)
		_, ok, p := s.stripe(h).t.find(h, k)
		if !ok {
			t.Fatalf("user %s lost", c.User)
		}
		probes += p
		longest = max(longest, p)
	}
	if fullest > 2*n/stripes || probes > 4*n || longest > maxProbe {
		t.Fatalf("fullest stripe %d keys (share %d), %d probes for %d lookups, longest %d", fullest, n/stripes, probes, n, longest)
	}
}

// A hand-off's key state carries the stored key that identifies the
// counter, and for shards of earlier versions the 128-bit hash they know
// it by; a state without the stored key (from such a shard) is skipped,
// not refused, and a stored key that is not one is refused by field.
func TestImportOfStoredKeys(t *testing.T) {
	srv := &Server{store: NewStore(StoreOptions{}, t0), opts: Options{Partitions: 1024, Config: component.Config{Logger: slog.New(slog.DiscardHandler)}}}
	r := tokenRule(3, time.Hour)
	from := NewStore(StoreOptions{}, t0)
	decide(from, "alice", t0, r, 2)
	exported := exportAll(from, allPartitions, 1024)
	if len(exported) != 1 {
		t.Fatalf("exported %d keys", len(exported))
	}
	ks := exported[0].keyState()
	old := key.Make("svc", "r", "alice")
	if string(ks.Key) != string(storedKey(nil, r.Algorithm, "svc", "r", "alice")) || ks.Hi != old.Hi || ks.Lo != old.Lo&^7|uint64(r.Algorithm) {
		t.Fatalf("key state %+v: want the stored key, and the old hash with the algorithm in lo", ks)
	}
	ctx := context.Background()
	legacy := &shardlimitv1.KeyState{Hi: ks.Hi, Lo: ks.Lo, Algorithm: ks.Algorithm, A: ks.A, B: ks.B, FreshUnixNs: ks.FreshUnixNs}
	if resp, err := srv.Import(ctx, &shardlimitv1.ImportRequest{Keys: []*shardlimitv1.KeyState{legacy}}); err != nil || resp.Imported != 0 || srv.store.Len() != 0 {
		t.Fatalf("a state without a stored key: %v, %v, %d keys held; want it skipped", resp, err, srv.store.Len())
	}
	for _, bad := range []struct {
		key  string
		want string
	}{
		{"\x02svc\x00r\x00alice", "keys[0].algorithm: 1 does not match the key"},
		{"\x01svc-r-alice", "keys[0].key: not the algorithm's byte then service NUL rule NUL user within their bounds"},
		{"\x01svc\x00r\x00" + strings.Repeat("u", key.MaxUserLength+1), "keys[0].key: not the algorithm's byte"},
		{"\x01" + strings.Repeat("u", 5000), "keys[0].key: length 5001 exceeds the maximum of 4355 bytes"},
	} {
		k := proto.CloneOf(ks)
		k.Key = []byte(bad.key)
		if _, err := srv.Import(ctx, &shardlimitv1.ImportRequest{Keys: []*shardlimitv1.KeyState{k}}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("stored key %.20q: %v, want %q", bad.key, err, bad.want)
		}
	}
	if resp, err := srv.Import(ctx, &shardlimitv1.ImportRequest{Keys: []*shardlimitv1.KeyState{ks}}); err != nil || resp.Imported != 1 {
		t.Fatalf("import: %v, %v", resp, err)
	}
	if d := decide(srv.store, "alice", t0, r, 0); d.Remaining != 1 {
		t.Fatalf("alice after the import: %+v, want 1 left", d)
	}
}

// A chunk's size estimate counts the stored key, so that chunks of states
// of long users stay under the bound (and gRPC's message limit).
func TestKeyStateBytesCountsTheKey(t *testing.T) {
	for _, user := range []string{"alice", strings.Repeat("u", key.MaxUserLength)} {
		e := Exported{Key: storedKey(nil, limiter.SlidingLog, "svc", "r", user), Algo: limiter.SlidingLog, Times: []int64{t0, t0 + 1}, Fresh: t0 + sec}
		ks := e.keyState()
		if est, n := keyStateBytes(ks), proto.Size(ks); est < n {
			t.Fatalf("user of %d bytes: estimated %d bytes, encoded %d", len(user), est, n)
		}
	}
}
