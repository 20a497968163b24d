package router

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/member"
)

// A shard whose circuit is open and whose connection is down is reported
// once it has been so for UnreachableAfter while the router reached etcd:
// counted from the later of the two. A router split off from etcd (and
// from the shards on the other side) reports nothing while the split
// lasts, and after the heal only if the shard stays unreachable for a
// whole UnreachableAfter more.
func TestAShardIsReportedOnlyAfterBeingUnreachableWhileEtcdWas(t *testing.T) {
	const after = time.Second
	cut := &peer{member: member.Member{ID: "shard-1", Addr: "10.0.0.1:7000"}, breaker: &breaker{failures: 1, failed: 1, silent: true}}
	up := &peer{member: member.Member{ID: "shard-2", Addr: "10.0.0.2:7000"}, breaker: &breaker{failures: 1}}
	rt := &routing{peers: []*peer{cut, up}}
	t0 := time.Unix(1_700_000_000, 0)
	reported := func(seen map[*peer]*downSince, at, etcdSince time.Time) bool {
		_, ok := unreachable(rt, seen, at, etcdSince, after, "router-1")["shard-1"]
		return ok
	}

	seen := map[*peer]*downSince{}
	reported(seen, t0, t0) // first seen open and down at t0
	if reported(seen, t0.Add(after-time.Nanosecond), t0) {
		t.Fatal("reported before UnreachableAfter")
	}
	if !reported(seen, t0.Add(after), t0) {
		t.Fatal("not reported after UnreachableAfter with etcd reached throughout")
	}

	seen = map[*peer]*downSince{}
	reported(seen, t0, time.Time{})
	if reported(seen, t0.Add(10*after), time.Time{}) {
		t.Fatal("reported while the router did not reach etcd")
	}
	healed := t0.Add(10 * after)
	if reported(seen, healed.Add(after-time.Nanosecond), healed) {
		t.Fatal("reported within UnreachableAfter of reaching etcd again: the split's time counted")
	}
	if !reported(seen, healed.Add(after), healed) {
		t.Fatal("not reported UnreachableAfter after reaching etcd again")
	}
}

// The probe marks etcd unreached on an error, and reached again from the
// first answer after one.
func TestEtcdReachProbe(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clock := t0
	now := func() time.Time { return clock }
	fail := errors.New("context deadline exceeded")
	var err error
	get := func(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) { return nil, err }
	e := etcdReach{back: t0}
	e.probe(context.Background(), get, "k", now)
	if e.since() != t0 {
		t.Fatalf("since %v after an answer, want %v", e.since(), t0)
	}
	err, clock = fail, t0.Add(time.Second)
	e.probe(context.Background(), get, "k", now)
	if !e.since().IsZero() {
		t.Fatalf("since %v after a failed probe, want zero", e.since())
	}
	err, clock = nil, t0.Add(2*time.Second)
	e.probe(context.Background(), get, "k", now)
	if e.since() != clock {
		t.Fatalf("since %v after etcd answered again, want %v", e.since(), clock)
	}
}
