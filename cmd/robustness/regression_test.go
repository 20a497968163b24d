package robustness

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/cmd/robustness/checker"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Seed 50 of the suite cut shard-1 off from etcd for 22 s (two cuts in a
// row). Its lease was lost, and the other shards took its partitions over
// with their counters. shard-1, still seeing itself a member, found those
// partitions stuck (fenced here, owned by its view) and took them back
// from its takers, fencing them there while the routers sent their
// checks there: a third of the users were answered by policy until the
// heal. Now heal takes back only what etcd confirms, read at that moment
// (shard/takeover.go); cut off, the shard logs that it does not.
//
// The test cuts shard-1 off from etcd under the workload until the shard
// has declined twice, heals the cut, and checks that shard-1 took nothing
// back, that policy answers during the cut were for shard-1's users only,
// and that no count was lost (no reset allowed: the takers pulled the
// counters with a fence).
func TestShardCutFromEtcdTakesNothingBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: skipped; CI runs as root")
	}
	binary(t)
	cfg, c, rs, w, owners := startLoaded(t, 50)

	shard := c.proc("shard-1")
	from := logSize(shard.Log)
	cut := applied{step: Step{Kind: CutShardEtcd, Targets: []string{"shard-1"}}, from: time.Now()}
	for _, l := range [][2]string{{"shard-1", "etcd"}, {"etcd", "shard-1"}} {
		if err := c.net.Cut(c.hosts[l[0]], c.hosts[l[1]]); err != nil {
			t.Fatal(err)
		}
	}
	// The lease is lost and the routers route to the other two; shard-1
	// finds their partitions stuck at two looks in a row and declines
	// (or, as before the fix, takes them back).
	c.waitRouters(t, "shardlimit_router_members", 2)
	poll.Until(t, readyTimeout, func() error {
		if logHas(shard.Log, from, tookBack) {
			t.Fatalf("shard-1, cut off from etcd after its lease was lost, took partitions back:\n%s", shard.Tail(20))
		}
		if !logHas(shard.Log, from, healUnconfirmed) {
			return fmt.Errorf("shard-1 has not yet found its partitions stuck and declined")
		}
		return nil
	})
	for _, l := range [][2]string{{"shard-1", "etcd"}, {"etcd", "shard-1"}} {
		if err := c.net.Heal(c.hosts[l[0]], c.hosts[l[1]]); err != nil {
			t.Fatal(err)
		}
	}
	cut.to = time.Now()
	c.waitRouters(t, "shardlimit_router_members", 3)
	healed := time.Now()
	poll.Until(t, readyTimeout, func() error { return decidedAgain(w, rs, healed) })
	ops := w.stop()
	owners.close()

	if logHas(shard.Log, from, tookBack) {
		t.Errorf("shard-1 took partitions back:\n%s", shard.Tail(20))
	}
	ownerAt := func(o op, at time.Time) string { return owners.owner(o.service, o.Rule, o.user, at) }
	others := 0
	for i := range ops {
		o := &ops[i]
		o.owner = ownerAt(*o, o.Send)
		if o.Outcome == checker.Policy && !o.Send.Before(cut.from) && o.Send.Before(cut.to) && !its(*o, cut, ownerAt) {
			if others++; others == 1 {
				t.Errorf("a policy answer during the cut for a user of %s (shard-1's fault): %s sent %s", o.owner, o.Key, o.Send.Format("15:04:05.000"))
			}
		}
	}
	if others > 0 {
		t.Errorf("%d policy answers during shard-1's cut from etcd for other shards' users", others)
	}
	res := check(t, 50, rs, ops, []applied{cut}, cfg, owners)
	r := res.rows[cut.step.Type()]
	t.Logf("cut for %v: %d checks, %d answered by policy (%d for shard-1's users), first %v after the cut, %d keys over",
		cut.to.Sub(cut.from).Round(time.Millisecond), r.checks, r.policy, r.its, dur(r.firstPolicy), res.viol)
}

// tookBack is what a shard logs when heal takes stuck partitions back.
const tookBack = "partitions this shard owns were neither decided nor being taken over"

// healUnconfirmed is what it logs when etcd does not confirm them
// (shard/takeover.go).
const healUnconfirmed = "partitions look stuck here, but etcd does not confirm that this shard owns them"
