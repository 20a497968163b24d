package rebalance_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// testRules are the tests' rules. checkout's fixed window is 366 days:
// fixed windows are aligned on the epoch, and an hour's would end mid-test
// at the turn of the wall-clock hour, resetting the users at their limit.
func testRules(t *testing.T) []rules.Rule {
	t.Helper()
	rs, err := rules.Parse("test.yaml", []byte(`
rules:
  - {service: shop, endpoint: /browse, name: browse, limit: 1000000, period: 1h}
  - {service: shop, endpoint: /checkout, name: checkout, algorithm: fixed_window, limit: 10, period: 366d}
`))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func check(t *testing.T, c shardlimitv1.RateLimiterClient, endpoint, user string, hits int64) *shardlimitv1.Decision {
	t.Helper()
	resp, err := c.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: endpoint, User: user, Hits: proto.Int64(hits)}}})
	if err != nil {
		t.Fatalf("check %s %s: %v", endpoint, user, err)
	}
	return resp.Decisions[0]
}

// usersOn returns n users of rule whose partitions are all different and
// owned by shard id.
func usersOn(t *testing.T, c *clustertest.Cluster, rule, id string, n int) []string {
	t.Helper()
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("u%d", i)
		if m := c.Owner("shop", rule, u); m.ID == id {
			p := c.Partition("shop", rule, u)
			if !seen[p] {
				seen[p] = true
				out = append(out, u)
			}
		}
		if i > 1_000_000 {
			t.Fatal("not enough users on the shard")
		}
	}
	return out
}

// usersIn returns n users of rule whose partitions are in parts.
func usersIn(t *testing.T, c *clustertest.Cluster, rule string, parts map[int]bool, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("v%d", i)
		if parts[c.Partition("shop", rule, u)] {
			out = append(out, u)
		}
		if i > 10_000_000 {
			t.Fatal("not enough users in the partitions")
		}
	}
	return out
}

// skew puts most traffic on the first shard, whose ID it returns: 24 users
// with 20 checks each, and 4 users with one check on every other shard.
func skew(t *testing.T, c *clustertest.Cluster) string {
	t.Helper()
	cl := c.Client(0)
	hot := c.Shards[0].ID()
	for _, u := range usersOn(t, c, "browse", hot, 24) {
		for range 20 {
			check(t, cl, "/browse", u, 1)
		}
	}
	for _, s := range c.Shards[1:] {
		for _, u := range usersOn(t, c, "browse", s.ID(), 4) {
			check(t, cl, "/browse", u, 1)
		}
	}
	return hot
}

// A skewed load that puts most traffic on one shard is brought under the
// threshold by one run; the plan changes nothing, the run moves partitions
// and publishes a map that every router follows.
func TestSkewBroughtUnderThresholdByOneRun(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Routers: 2, Rules: testRules(t)})
	c.StartRebalance()
	hot := skew(t, c)
	adm := c.Admin(0)
	ctx := context.Background()
	var plan *shardlimitv1.PlanResponse
	poll.Until(t, 10*time.Second, func() error { // until a leader is elected
		var err error
		plan, err = adm.RebalancePlan(ctx, &shardlimitv1.PlanRequest{})
		return err
	})
	if len(plan.Moves) == 0 || plan.RatioBefore <= 1.25 || plan.RatioAfter > 1.25 || plan.MapVersion != 0 {
		t.Fatalf("plan: %v", plan)
	}
	if c.Routers[0].MapVersion() != 0 {
		t.Fatal("a plan published a map")
	}
	run, err := adm.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	r := run.Run
	if r.Outcome != "moved" || r.MapVersion != 1 || len(r.Moves) != len(plan.Moves) || r.RatioAfter > 1.25 {
		t.Fatalf("run: %v", r)
	}
	t.Logf("max/mean shard load %.2f before, %.2f after one run; %d partitions moved, %d counter keys handed over",
		r.RatioBefore, r.RatioAfter, len(r.Moves), r.KeysMoved)
	poll.Until(t, 10*time.Second, func() error {
		for i, rt := range c.Routers {
			if v := rt.MapVersion(); v != 1 {
				return fmt.Errorf("router %d routes by version %d", i, v)
			}
		}
		return nil
	})
	for _, mv := range r.Moves {
		if mv.From != hot {
			t.Errorf("moved partition %d from %s, not the hot shard", mv.Partition, mv.From)
		}
	}
	again, err := adm.RebalancePlan(ctx, &shardlimitv1.PlanRequest{})
	if err != nil || again.MapVersion != 1 {
		t.Fatalf("plan after the run: %v %v", again, err)
	}
	hist, err := adm.ShardMapHistory(ctx, &shardlimitv1.ShardMapHistoryRequest{})
	if err != nil || len(hist.Versions) != 1 || hist.InForce != 1 || len(hist.Versions[0].Moves) != len(r.Moves) {
		t.Fatalf("history: %v %v", hist, err)
	}
	runs, err := adm.RebalanceRuns(ctx, &shardlimitv1.RebalanceRunsRequest{})
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].Outcome != "moved" {
		t.Fatalf("runs: %v %v", runs, err)
	}
}

// A user at their limit before a planned move is still at their limit after
// it, and while the move happens, checks keep flowing; users consuming
// through the move get exactly their limit, no more.
func TestLimitedUserStaysLimitedAcrossMove(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	c.StartRebalance()
	cl := c.Client(0)
	adm := c.Admin(0)
	ctx := context.Background()
	hot := c.Shards[0].ID()
	// Load shard 0 with browse traffic so that the run moves partitions off
	// it, among them the partitions of some checkout users at their limit.
	hotParts := map[int]bool{}
	for _, u := range usersOn(t, c, "browse", hot, 30) {
		hotParts[c.Partition("shop", "browse", u)] = true
		for range 10 {
			check(t, cl, "/browse", u, 1)
		}
	}
	// Checkout users in the loaded partitions: the ones a run moves.
	inHot := usersIn(t, c, "checkout", hotParts, 80)
	limited := inHot[:40]
	for _, u := range limited {
		if d := check(t, cl, "/checkout", u, 10); !d.Allowed {
			t.Fatalf("%s: %v", u, d)
		}
		if d := check(t, cl, "/checkout", u, 1); d.Allowed {
			t.Fatalf("%s over the limit allowed before the move", u)
		}
	}
	// Active users consume through the move: each is allowed at most its
	// limit of 10 in all, wherever its counter lives.
	active := inHot[40:]
	var activeAllowed sync.Map
	// Keep checking the limited users, and consuming for the active ones,
	// during the move.
	stop := make(chan struct{})
	var overAdmitted, during atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, u := range limited {
				during.Add(1)
				if check(t, cl, "/checkout", u, 1).Allowed {
					overAdmitted.Add(1)
				}
			}
			for _, u := range active {
				if check(t, cl, "/checkout", u, 1).Allowed {
					n, _ := activeAllowed.LoadOrStore(u, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				}
			}
		}
	})
	var run *shardlimitv1.RunResponse
	poll.Until(t, 10*time.Second, func() error {
		var err error
		run, err = adm.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}, Wait: true})
		return err
	})
	close(stop)
	wg.Wait()
	if run.Run.Outcome != "moved" {
		t.Fatalf("run: %v", run.Run)
	}
	movedUsers := 0
	for _, u := range limited {
		if m := c.Owner("shop", "checkout", u); m.ID != hot {
			movedUsers++
		}
		if d := check(t, cl, "/checkout", u, 1); d.Allowed || d.FailurePolicy {
			t.Errorf("limited user %s allowed after the move: %v", u, d)
		}
	}
	if movedUsers == 0 {
		t.Fatal("the run moved none of the limited users' partitions; the test proves nothing")
	}
	t.Logf("%d of %d limited users moved shard; over-admission during the move: %d allowed of %d checks on users at their limit",
		movedUsers, len(limited), overAdmitted.Load(), during.Load())
	if overAdmitted.Load() != 0 {
		t.Errorf("over-admitted %d checks during the move", overAdmitted.Load())
	}
	// Active users: anything allowed beyond the limit is over-admission.
	var activeMoved, over int64
	for _, u := range active {
		n := int64(0)
		if v, ok := activeAllowed.Load(u); ok {
			n = v.(*atomic.Int64).Load()
		}
		for check(t, cl, "/checkout", u, 1).Allowed { // use up what is left
			n++
		}
		if n > 10 {
			over += n - 10
		}
		if m := c.Owner("shop", "checkout", u); m.ID != hot {
			activeMoved++
		}
	}
	t.Logf("%d of %d users consuming through the move moved shard; allowed beyond their limit in all: %d", activeMoved, len(active), over)
	if over != 0 {
		t.Errorf("over-admission %d: the move is exact (the old owner forwards checks from its fence until routers switch)", over)
	}
}

// Two instances: one leads; a write fenced by a deposed leader's key fails;
// killing the leader hands over once its session lease is gone.
func TestLeaderElectionFencingAndHandover(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	a, b := c.StartRebalance(), c.StartRebalance()
	var leader, follower *rebalance.Job
	poll.Until(t, 10*time.Second, func() error {
		switch {
		case a.Leading() && b.Leading():
			return fmt.Errorf("both instances lead")
		case a.Leading():
			leader, follower = a, b
		case b.Leading():
			leader, follower = b, a
		default:
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	// The follower refuses to plan and names the leader.
	_, err := shardlimitv1.NewRebalancerClient(c.Operator(follower.Addr())).Plan(context.Background(), &shardlimitv1.PlanRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition {
		t.Fatalf("follower plan: %v", err)
	}
	// Both instances never lead at once, sampled while the leader dies.
	var both atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				if a.Leading() && b.Leading() {
					both.Store(true)
				}
			}
		}
	})
	cli, err := etcd.Dial([]string{c.Etcd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	killed := time.Now()
	leader.Kill()
	// Its session lease expires (revoked here: the sessions last 10 s so
	// that none is lost to a loaded machine before this point).
	revokeLeaderSession(t, cli, c.Prefix)
	poll.Until(t, 10*time.Second, func() error {
		if !follower.Leading() {
			return fmt.Errorf("the follower does not lead yet")
		}
		return nil
	})
	close(stop)
	wg.Wait()
	t.Logf("handover %v after the leader was killed", time.Since(killed).Round(time.Millisecond))
	if both.Load() {
		t.Fatal("two instances led at once")
	}
	// The new leader runs, once the router has seen it lead (it follows
	// the election through etcd, and until then finds no leader); a map
	// write fenced by a stale election key fails.
	var run *shardlimitv1.RunResponse
	poll.Until(t, 30*time.Second, func() error {
		var err error
		run, err = c.Admin(0).RebalanceRun(context.Background(), &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}})
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("the router sees no leader yet: %v", err)
		}
		if err != nil {
			t.Fatalf("run by the new leader: %v", err)
		}
		return nil
	})
	if run.Run.Leader != follower.ID() {
		t.Fatalf("run by %s, want the new leader %s", run.Run.Leader, follower.ID())
	}
	m, rev, _ := mapstore.Load(context.Background(), cli, etcd.Layout(c.Prefix))
	stale := mapstoreFenceOfDeadLeader(t, cli, c.Prefix)
	err = mapstore.Publish(context.Background(), cli, etcd.Layout(c.Prefix), emptyMap(), m, rev, stale)
	if err != mapstore.ErrConflict {
		t.Fatalf("a write fenced by a dead leader's key: %v, want ErrConflict", err)
	}
}

// A run does nothing, and says why, when a shard cannot be read; a dead
// shard is never a target once its lease expired.
func TestRunSkipsWhenAShardCannotBeRead(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	c.StartRebalance()
	adm := c.Admin(0)
	victim := c.Shards[2]
	victim.Kill()
	var run *shardlimitv1.RunResponse
	poll.Until(t, 10*time.Second, func() error {
		var err error
		run, err = adm.RebalanceRun(context.Background(), &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}})
		return err
	})
	if run.Run.Outcome != "skipped" || run.Run.MapVersion != 0 {
		t.Fatalf("run with an unreadable shard: %v", run.Run)
	}
	t.Logf("skipped run says: %s", run.Run.Error)
	c.RevokeLease(victim) // its lease expires, after the run above
	c.WaitMembers(2)
	cl := c.Client(0)
	for _, u := range usersOn(t, c, "browse", c.Shards[0].ID(), 20) {
		for range 10 {
			check(t, cl, "/browse", u, 1)
		}
	}
	run, err := adm.RebalanceRun(context.Background(), &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, mv := range run.Run.Moves {
		if mv.To == victim.ID() {
			t.Fatalf("planned a move onto the dead shard: %v", mv)
		}
	}
}

// Rolling back to a kept version publishes its pins again, handing the
// counters over like a run.
func TestRollbackToKeptVersion(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	c.StartRebalance()
	cl := c.Client(0)
	adm := c.Admin(0)
	ctx := context.Background()
	hot := c.Shards[0].ID()
	for _, u := range usersOn(t, c, "browse", hot, 30) {
		for range 10 {
			check(t, cl, "/browse", u, 1)
		}
	}
	var run *shardlimitv1.RunResponse
	poll.Until(t, 10*time.Second, func() error {
		var err error
		run, err = adm.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}, Wait: true})
		return err
	})
	if run.Run.MapVersion != 1 || len(run.Run.Moves) == 0 {
		t.Fatalf("first run: %v", run.Run)
	}
	moved := int(run.Run.Moves[0].Partition)
	pinnedTo := run.Run.Moves[0].To

	// Version 2 drops every pin: the moved partition goes back to the ring.
	cli, err := etcd.Dial([]string{c.Etcd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	m, rev, err := mapstore.Load(ctx, cli, etcd.Layout(c.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := mapstore.Publish(ctx, cli, etcd.Layout(c.Prefix), emptyMap(), m, rev); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if v := c.Routers[0].MapVersion(); v != 2 {
			return fmt.Errorf("router at version %d", v)
		}
		return nil
	})
	// A user in the moved partition, at its limit under version 2.
	var user string
	for i := 0; user == ""; i++ {
		if u := fmt.Sprintf("r%d", i); c.Partition("shop", "checkout", u) == moved {
			user = u
		}
	}
	// Version 2 moved the partition without a hand-off: its new owner
	// takes it over from the old one first, and answers nothing meanwhile
	// (routers answer by policy, which counts nothing).
	poll.Until(t, 10*time.Second, func() error {
		if d := check(t, cl, "/checkout", user, 10); d.FailurePolicy {
			return fmt.Errorf("answered by policy: the partition is being taken over")
		}
		return nil
	})

	back, err := adm.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test rollback", RollbackTo: 1}, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if back.Run.MapVersion != 3 || back.Run.Outcome != "moved" {
		t.Fatalf("rollback: %v", back.Run)
	}
	if owner := c.Owner("shop", "checkout", user); owner.ID != pinnedTo {
		t.Fatalf("after rollback partition %d is owned by %s, want %s as in version 1", moved, owner.ID, pinnedTo)
	}
	if d := check(t, cl, "/checkout", user, 1); d.Allowed {
		t.Fatalf("user at its limit allowed after the rollback moved its counter: %v", d)
	}
	if _, err := adm.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{RollbackTo: 99}}); err == nil {
		t.Fatal("rollback to a version never written succeeded")
	}
}
