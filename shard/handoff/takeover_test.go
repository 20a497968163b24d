package handoff_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/eviction"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/metrictest"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// waitTakeovers waits until s counted one takeover that ended with result.
func waitTakeovers(t *testing.T, s *shard.Server, result string) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() error {
		if n := metrictest.Value(t, s.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": result}); n != 1 {
			return fmt.Errorf("%v takeovers that ended %s", n, result)
		}
		return nil
	})
}

// decideOne has c decide one hit of user's fixed-window limit.
func decideOne(t *testing.T, c shardlimitv1.ShardClient, user string) *shardlimitv1.ShardDecision {
	t.Helper()
	resp, err := c.Decide(context.Background(), &shardlimitv1.DecideRequest{
		Rules: []*shardlimitv1.RuleParams{fixedWindow},
		Checks: []*shardlimitv1.ShardCheck{{
			Service: "s", User: user, Hits: 1, Partition: uint32(key.Partition(key.Hash("s", "r", user), partitions)),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Decisions[0]
}

// usersOf returns n users (u0, u1, ...) whose partitions t gives to id.
func usersOf(t *testing.T, s *shard.Server, id string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("u%d", i)
		if o, ok := s.Owners().Owner(key.Partition(key.Hash("s", "r", u), partitions)); ok && o.ID == id {
			out = append(out, u)
		}
		if i > 100*n+10_000 {
			t.Fatalf("%s owns no partition of the first %d users", id, i)
		}
	}
	return out
}

// A pull with a fence stops the source deciding the partitions before it
// exports them: its checks are answered not decided, and change nothing;
// the destination decides them with every hit the source counted. A
// source whose owner table still gives it the partitions heals: it takes
// them over again.
func TestFencedPullStopsTheSource(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, a := startShard(t, prefix, "a")
	_, b := startShard(t, prefix, "b")
	fill(t, a, 100, 10)
	pullAll(t, b, sa, &shardlimitv1.PullRequest{Fence: true})
	if d := decideOne(t, a, "u0"); !d.NotDecided || d.Allowed {
		t.Fatalf("the fenced source answered %v, want not decided", d)
	}
	if d := decideOne(t, b, "u0"); d.NotDecided || d.Allowed {
		t.Fatalf("the destination answered %v, want denied: u0 is at their limit", d)
	}
	// a's owner table still gives it every partition (b is in a cluster of
	// its own): a fenced partition that no takeover will bring back is
	// taken over again after two looks, from the shards a knows (none).
	poll.Until(t, 30*time.Second, func() error {
		if d := decideOne(t, a, "u0"); d.NotDecided || d.Allowed {
			return fmt.Errorf("a answers %v, want denied by a", d)
		}
		return nil
	})
}

// A shard that crashed (kill -9) refuses the connection: its partitions'
// new owner takes them over at once, counting from zero (a crash is a
// reset; routers keep users over their limit denied by their over-limit
// caches).
func TestTakeoverFromACrashedShardCountsFromZero(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sg, g := startIn(t, prefix, "g", nil)
	sv, v := startIn(t, prefix, "v", nil)
	waitOwns(t, sg, "v")
	users := usersOf(t, sv, "v", 5)
	for _, u := range users {
		for range 10 {
			decideOne(t, v, u)
		}
	}
	sv.Kill()
	revokeLease(t, prefix, "v") // its lease expires
	poll.Until(t, 20*time.Second, func() error {
		if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": "unreachable"}); n != 1 {
			return fmt.Errorf("%v takeovers from an unreachable shard", n)
		}
		return nil
	})
	for _, u := range users {
		if d := decideOne(t, g, u); d.NotDecided || !d.Allowed || d.Remaining != 9 {
			t.Fatalf("%s after the crash: %v, want allowed from zero (9 remaining)", u, d)
		}
	}
}

// A takeover from a crashed shard sweeps every other member before it
// decides: here the map moved a partition from v to x, which had crashed
// (nothing listens at its address), and then on to g. v, whose table may
// not have caught up, decides it until a fence reaches it; g's sweep
// fences it and brings its counters, so g goes on from v's count, not
// from zero.
func TestTakeoverFromACrashedShardSweepsTheOthers(t *testing.T) {
	takeoverSweeps(t, func(string) string { return rpctest.DeadAddr(t) })
}

// The same when a process started since at the crashed shard's address
// answers the takeover's pull (here another live shard, w, whose start
// differs from the record's): it holds none of the crashed shard's
// counters, so its answer does not stand for the owner's, and g sweeps.
func TestTakeoverAnsweredByAnotherProcessAtTheAddressSweepsTheOthers(t *testing.T) {
	takeoverSweeps(t, func(prefix string) string {
		sw, _ := startIn(t, prefix, "w", nil)
		return sw.Addr()
	})
}

// takeoverSweeps moves a partition decided at v to a record x at the
// address that xAddr gives, then on to g, and checks that g's takeover
// from x swept v's counters.
func takeoverSweeps(t *testing.T, xAddr func(prefix string) string) {
	prefix := "/test/" + t.Name() + "/"
	sg, g := startIn(t, prefix, "g", nil)
	sv, v := startIn(t, prefix, "v", nil)
	waitOwns(t, sg, "v")
	u := usersOf(t, sv, "v", 1)[0]
	p := key.Partition(key.Hash("s", "r", u), partitions)
	for range 10 {
		decideOne(t, v, u)
	}
	register(t, prefix, "x", xAddr(prefix))
	pin(t, prefix, p, "x")
	for _, s := range []*shard.Server{sg, sv} {
		poll.Until(t, 10*time.Second, func() error {
			if o, _ := s.Owners().Owner(p); o.ID != "x" {
				return fmt.Errorf("%s sees partition %d owned by %q", s.ID(), p, o.ID)
			}
			return nil
		})
	}
	pin(t, prefix, p, "g")
	poll.Until(t, 20*time.Second, func() error {
		if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": "unreachable"}); n != 1 {
			return fmt.Errorf("%v takeovers from an unreachable shard", n)
		}
		if d := decideOne(t, g, u); d.NotDecided {
			return errors.New("g does not decide the partition yet")
		}
		return nil
	})
	if d := decideOne(t, g, u); d.NotDecided || d.Allowed {
		t.Fatalf("%s at g after the takeover: %v, want denied (v's 10 hits swept here)", u, d)
	}
}

// pin publishes the next shard map under prefix, with partition p pinned
// to member id.
func pin(t *testing.T, prefix string, p int, id string) {
	t.Helper()
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	ctx := context.Background()
	prev, rev, err := mapstore.Load(ctx, cli, etcd.Layout(prefix))
	if err != nil {
		t.Fatal(err)
	}
	m := &shardmap.Map{Partitions: partitions, Owners: make([]string, partitions), Reason: t.Name()}
	if prev != nil && len(prev.Owners) == partitions {
		copy(m.Owners, prev.Owners)
	}
	m.Owners[p] = id
	if err := mapstore.Publish(ctx, cli, etcd.Layout(prefix), m, prev, rev); err != nil {
		t.Fatal(err)
	}
}

// registered is a member record in etcd under a lease of its own.
type registered struct {
	lease   clientv3.LeaseID
	cli     *clientv3.Client
	started time.Time
}

// register registers member id, serving at addr, under prefix.
func register(t *testing.T, prefix, id, addr string) registered {
	t.Helper()
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	b, err := member.Encode(member.Member{ID: id, Addr: addr, State: member.Serving, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, etcd.Layout(prefix).Member(id), string(b), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	return registered{lease: lease.ID, cli: cli, started: started}
}

// revoke revokes the record's lease, as etcd expires the lease of a
// stopped shard.
func (r registered) revoke(t *testing.T) {
	t.Helper()
	if err := etcd.Revoke(context.Background(), r.cli, r.lease); err != nil {
		t.Fatal(err)
	}
}

// stalled is a member record in etcd whose address accepts connections
// and answers nothing, as a stopped process (SIGSTOP) does.
type stalled struct {
	registered
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// registerStalled registers member x, serving, at a stalled address.
func registerStalled(t *testing.T, prefix string) *stalled {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := &stalled{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			x.mu.Lock()
			x.conns = append(x.conns, c)
			x.mu.Unlock()
		}
	}()
	t.Cleanup(x.close)
	x.registered = register(t, prefix, "x", ln.Addr().String())
	return x
}

// revokeLease revokes the lease of member id's record under prefix, as
// etcd expires the lease of a shard that died.
func revokeLease(t *testing.T, prefix, id string) {
	t.Helper()
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), etcd.Layout(prefix).Member(id))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("member record of %s: %v", id, err)
	}
	if err := etcd.Revoke(context.Background(), cli, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("revoke the lease of %s: %v", id, err)
	}
}

// close closes the address and the connections it accepted.
func (x *stalled) close() {
	_ = x.ln.Close()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range x.conns {
		_ = c.Close()
	}
}

// A shard that gains the partitions of a stalled shard decides none of
// their checks while it tries to pull them, and gives up after its
// takeover timeout: they count from zero then.
func TestTakeoverFromAStalledShard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		result  string
	}{
		// The stalled shard goes away while the pull waits: observe the
		// pending partitions first.
		{"pending until it goes away", time.Minute, "unreachable"},
		{"gives up after the timeout", 200 * time.Millisecond, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/test/%s/", t.Name())
			sg, g := startIn(t, prefix, "g", func(o *shard.Options) { o.TakeoverTimeout = tc.timeout })
			x := registerStalled(t, prefix)
			waitOwns(t, sg, "x")
			users := usersOf(t, sg, "x", 3)
			x.revoke(t)
			if tc.result == "unreachable" {
				poll.Until(t, 10*time.Second, func() error {
					if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_partitions", map[string]string{"state": "pending"}); n == 0 {
						return fmt.Errorf("no partition pending")
					}
					return nil
				})
				for _, u := range users {
					if d := decideOne(t, g, u); !d.NotDecided {
						t.Fatalf("%s while its partition is taken over: %v, want not decided", u, d)
					}
				}
				x.close()
			}
			waitTakeovers(t, sg, tc.result)
			for _, u := range users {
				if d := decideOne(t, g, u); d.NotDecided || !d.Allowed {
					t.Fatalf("%s after the takeover: %v, want decided", u, d)
				}
			}
		})
	}
}

// slowExporter is a shard that lost its lease and answers a takeover's
// pull slowly, as on a loaded machine: it relays the export of the shard
// from, one key per chunk, each after gap.
type slowExporter struct {
	shardlimitv1.UnimplementedShardServer
	from shardlimitv1.ShardClient
	gap  time.Duration
}

func (e *slowExporter) ExportStream(req *shardlimitv1.ExportStreamRequest, st grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]) error {
	req = proto.Clone(req).(*shardlimitv1.ExportStreamRequest)
	req.MaxChunkKeys = 1
	src, err := e.from.ExportStream(st.Context(), req)
	if err != nil {
		return err
	}
	for {
		time.Sleep(e.gap)
		chunk, err := src.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(chunk); err != nil {
			return err
		}
	}
}

// A shard that lost its lease but answers is waited for, however long its
// counters take, as long as each chunk follows the last within the
// takeover timeout: its users keep their counts. (Bounded as a whole by
// the timeout, as before, a pull slowed by a loaded machine decided its
// partitions from what had arrived, and let users past their limits.)
// Here the export takes 13 gaps of a tenth of the timeout (one before each
// of 12 keys, one before its end): the setup of the two connections before
// the first chunk has most of the timeout, even on a loaded machine.
func TestTakeoverWaitsForAnOwnerThatAnswersSlowly(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	const timeout = 3 * time.Second
	sg, g := startIn(t, prefix, "g", func(o *shard.Options) { o.TakeoverTimeout = timeout })
	// v, in a cluster of its own, holds the counters that x, a member of
	// g's cluster, exports slowly.
	_, v := startShard(t, "/test/"+t.Name()+"-source/", "v")
	x := register(t, prefix, "x", servePeer(t, &slowExporter{from: v, gap: timeout / 10}))
	waitOwns(t, sg, "x")
	users := usersOf(t, sg, "x", 12)
	for _, u := range users {
		for range 10 {
			decideOne(t, v, u)
		}
	}
	x.revoke(t)
	poll.Until(t, 30*time.Second, func() error {
		for _, result := range []string{"timeout", "unreachable"} {
			if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": result}); n > 0 {
				t.Fatalf("%v takeovers ended %s, want exact", n, result)
			}
		}
		if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": "exact"}); n != 1 {
			return fmt.Errorf("%v exact takeovers", n)
		}
		return nil
	})
	for _, u := range users {
		if d := decideOne(t, g, u); d.NotDecided || d.Allowed {
			t.Fatalf("%s after the takeover: %v, want denied (at the limit counted on x)", u, d)
		}
	}
}

// servePeer serves impl as a shard's API with the test PKI's shard
// certificate until t ends, and returns its address.
func servePeer(t *testing.T, impl shardlimitv1.ShardServer) string {
	t.Helper()
	p, err := pki()
	if err != nil {
		t.Fatal(err)
	}
	return rpctest.Serve(t, func(srv *grpc.Server) { shardlimitv1.RegisterShardServer(srv, impl) },
		grpc.Creds(credentials.NewTLS(must(creds.ServerTLS(p.Shard, tls.RequireAndVerifyClientCert)))))
}

// heldExporter is a final copy's source whose export is held until
// release: the partitions stay Receiving at the destination.
type heldExporter struct {
	shardlimitv1.UnimplementedShardServer
	release chan struct{}
}

func (e *heldExporter) ExportStream(_ *shardlimitv1.ExportStreamRequest, st grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]) error {
	select {
	case <-e.release:
	case <-st.Context().Done():
	}
	return nil
}

// distinctUsers returns n of a's users, each of a partition of its own.
func distinctUsers(t *testing.T, sa *shard.Server, n int) []string {
	t.Helper()
	var out []string
	seen := map[uint32]bool{}
	for _, u := range usersOf(t, sa, "a", 50*n) {
		if !seen[partitionOf(u)] && len(out) < n {
			seen[partitionOf(u)] = true
			out = append(out, u)
		}
	}
	return out
}

// holdFinalCopies starts a final copy to a of each user's partition from
// a source that holds its export, and returns once they are all Receiving
// at a; land(u) releases u's and returns once its copy has landed.
func holdFinalCopies(t *testing.T, sa *shard.Server, a shardlimitv1.ShardClient, users ...string) (land func(u string)) {
	t.Helper()
	held := map[string]*heldExporter{}
	finals := map[string]chan error{}
	for _, u := range users {
		held[u] = &heldExporter{release: make(chan struct{})}
		addr := servePeer(t, held[u])
		finals[u] = make(chan error, 1)
		go func() {
			_, err := a.Pull(context.Background(), &shardlimitv1.PullRequest{SourceId: "v-" + u, SourceAddr: addr,
				Partitions: []uint32{partitionOf(u)}, PartitionCount: partitions, Final: true, HandoffId: 1})
			finals[u] <- err
		}()
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := metrictest.Value(t, sa.Registry(), "shardlimit_shard_partitions", map[string]string{"state": "receiving"}); int(n) != len(users) {
			return fmt.Errorf("%v partitions receiving at a, want %d", n, len(users))
		}
		return nil
	})
	return func(u string) {
		t.Helper()
		close(held[u].release)
		if err := <-finals[u]; err != nil {
			t.Fatal(err)
		}
	}
}

// fencedPullArrives starts a taker's (b's) fenced pull of the users'
// partitions from a, and returns once a answers decided, one of them
// decided at a before, not decided: the pull has arrived. It returns the
// export, to read until it ends (readAll).
func fencedPullArrives(t *testing.T, a shardlimitv1.ShardClient, decided string, users ...string) grpc.ServerStreamingClient[shardlimitv1.ExportStreamResponse] {
	t.Helper()
	if d := decideOne(t, a, decided); d.NotDecided {
		t.Fatalf("%s before the pull: %v, want decided by a", decided, d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	parts := []uint32{partitionOf(decided)}
	for _, u := range users {
		parts = append(parts, partitionOf(u))
	}
	export, err := a.ExportStream(ctx, &shardlimitv1.ExportStreamRequest{Partitions: parts, PartitionCount: partitions, Fence: true, RequesterId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if d := decideOne(t, a, decided); !d.NotDecided {
			return fmt.Errorf("%s while the fenced pull waits: %v, want not decided by a", decided, d)
		}
		return nil
	})
	return export
}

// readAll reads an export until it ends.
func readAll(t *testing.T, export grpc.ServerStreamingClient[shardlimitv1.ExportStreamResponse]) {
	t.Helper()
	for {
		if _, err := export.Recv(); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// A taker's fenced pull stops the owner deciding what it decides as the
// pull arrives, before the owner waits for the other partitions asked for
// to settle (here one whose final copy is arriving): the taker may give
// up on the owner's silence meanwhile and decide from what arrived, and
// the owner must not be deciding them then (the simulation's seeds 4778
// and 5016).
func TestAFencedPullStopsTheOwnerBeforeItWaits(t *testing.T) {
	sa, a := startShard(t, "/test/"+t.Name()+"/", "a")
	users := distinctUsers(t, sa, 2)
	decided, arriving := users[0], users[1]
	land := holdFinalCopies(t, sa, a, arriving)
	export := fencedPullArrives(t, a, decided, arriving)
	land(arriving)
	readAll(t, export)
}

// A partition that a taker's fenced pull asked for and that becomes
// decided while the pull waits (here its final copy, arriving as the pull
// came, lands while the pull still waits for another partition's) is
// fenced at once: the taker may give up waiting and decide it from what
// arrived, and the owner must not be deciding it then. (The pull fenced
// only what was decided as it arrived.)
func TestAFencedPullFencesWhatBecomesDecidedWhileItWaits(t *testing.T) {
	sa, a := startShard(t, "/test/"+t.Name()+"/", "a")
	users := distinctUsers(t, sa, 3)
	decided, landing, waiting := users[0], users[1], users[2]
	land := holdFinalCopies(t, sa, a, landing, waiting)
	export := fencedPullArrives(t, a, decided, landing, waiting)
	land(landing) // while the pull waits for waiting's partition
	if d := decideOne(t, a, landing); !d.NotDecided {
		t.Fatalf("%s, landed while the fenced pull waits: %v, want not decided by a", landing, d)
	}
	land(waiting)
	readAll(t, export)
}

// A shard that gains partitions from a previous owner that still holds
// its member record but answers nothing (cut off from this shard alone,
// here a stalled address: the ring or the map moved the partitions
// between live shards) does not give up on its silence: that owner may
// still decide them for routers that have not switched. It pulls again,
// deciding none of their checks, until the owner's record goes.
func TestTakeoverPullsAgainWhileTheOwnerHoldsItsRecord(t *testing.T) {
	prefix := fmt.Sprintf("/test/%s/", t.Name())
	sg, g := startIn(t, prefix, "g", func(o *shard.Options) { o.TakeoverTimeout = 200 * time.Millisecond })
	x := registerStalled(t, prefix)
	waitOwns(t, sg, "x")
	users := usersOf(t, sg, "x", 3)
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	layout := etcd.Layout(prefix)
	prev, rev, err := mapstore.Load(context.Background(), cli, layout)
	if err != nil {
		t.Fatal(err)
	}
	pinned := &shardmap.Map{Partitions: partitions, Owners: make([]string, partitions), Reason: "test: every partition to g"}
	for p := range pinned.Owners {
		pinned.Owners[p] = "g"
	}
	if err := mapstore.Publish(context.Background(), cli, layout, pinned, prev, rev); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, func() error {
		if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": "again"}); n < 2 {
			return fmt.Errorf("%v pulls again", n)
		}
		return nil
	})
	for _, r := range []string{"exact", "unreachable", "timeout"} {
		if n := metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": r}); n != 0 {
			t.Fatalf("%v takeovers ended %s while the owner holds its record", n, r)
		}
	}
	for _, u := range users {
		if d := decideOne(t, g, u); !d.NotDecided {
			t.Fatalf("%s while its owner holds its record: %v, want not decided", u, d)
		}
	}
	x.revoke(t)
	waitTakeovers(t, sg, "timeout")
	for _, u := range users {
		if d := decideOne(t, g, u); d.NotDecided || !d.Allowed {
			t.Fatalf("%s after the owner's record went: %v, want decided", u, d)
		}
	}
}

// A takeover whose pull failed unfenced while the owner held its record
// makes one last pull once the record goes: the owner, which may not have
// noticed its lost lease and passes its lease guard once a cut healed, is
// fenced by it. Here the owner answers nothing (a cut) until its record
// goes during a pull, and then answers: the takeover ends exact, with the
// owner's word that it fenced, not from what arrived.
func TestTakeoverPullsOnceMoreWhenTheRecordGoesDuringAFailedPull(t *testing.T) {
	prefix := fmt.Sprintf("/test/%s/", t.Name())
	// The owner's silence ends a cut pull; an answer comes well within it,
	// however loaded the machine.
	sg, _ := startIn(t, prefix, "g", func(o *shard.Options) { o.TakeoverTimeout = 2 * time.Second })
	x := &cutOwner{revoke: make(chan chan struct{})}
	addr := servePeer(t, x)
	rec := register(t, prefix, "x", addr)
	go func() {
		for done := range x.revoke {
			_ = etcd.Revoke(context.Background(), rec.cli, rec.lease)
			close(done)
		}
	}()
	t.Cleanup(func() { close(x.revoke) })
	waitOwns(t, sg, "x")
	pin(t, prefix, 0, "g")
	// Two takeovers from x: the pinned partition's, and, once its record
	// went, the rest of its partitions'.
	ended := map[string]float64{}
	poll.Until(t, 20*time.Second, func() error {
		sum := 0.0
		for _, r := range []string{"exact", "unreachable", "timeout"} {
			ended[r] = metrictest.Value(t, sg.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": r})
			sum += ended[r]
		}
		if sum < 2 {
			return fmt.Errorf("%v takeovers ended: %v", sum, ended)
		}
		return nil
	})
	if ended["timeout"] != 0 || ended["unreachable"] != 0 {
		t.Fatalf("takeovers ended %v: the one whose record went during a failed pull did not pull once more", ended)
	}
	if n := x.pulls.Load(); n < 3 {
		t.Fatalf("%d pulls reached the owner, want at least 3 (two cut, one last)", n)
	}
}

// cutOwner is a shard's API whose ExportStream answers nothing, as across
// a cut, until its second pull, during which it has its record revoked;
// from then on it says it fenced and streams nothing.
type cutOwner struct {
	shardlimitv1.UnimplementedShardServer
	pulls  atomic.Int32
	revoke chan chan struct{}
	healed atomic.Bool
}

func (x *cutOwner) ExportStream(req *shardlimitv1.ExportStreamRequest, st grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]) error {
	n := x.pulls.Add(1)
	if x.healed.Load() {
		return st.SendHeader(metadata.Pairs(handoff.FencedHeader, "1"))
	}
	if n == 2 {
		// Healed before the record goes: a pull that follows the
		// revoke finds the owner answering.
		x.healed.Store(true)
		done := make(chan struct{})
		x.revoke <- done
		<-done
	}
	<-st.Context().Done() // the taker gives up on the silence
	return st.Context().Err()
}

// A takeover whose owner was evicted and acknowledged it (it fenced every
// partition: eviction.Ack) while the pull failed makes no last pull: the
// owner decides nothing, and a cut that lasts would make the taker wait
// out one more TakeoverTimeout before deciding (the fault suite's
// shard_cut: the evicted shard's users decided elsewhere a second later).
func TestTakeoverFromAnEvictionAcknowledgedPullsNoMore(t *testing.T) {
	prefix := fmt.Sprintf("/test/%s/", t.Name())
	sg, _ := startIn(t, prefix, "g", func(o *shard.Options) { o.TakeoverTimeout = 200 * time.Millisecond })
	x := &silentOwner{}
	addr := servePeer(t, x)
	rec := register(t, prefix, "x", addr)
	waitOwns(t, sg, "x")
	// The eviction as the rebalance leader writes it, acknowledged as the
	// evicted shard does once it fenced everything, then the revoke.
	layout := etcd.Layout(prefix)
	b, err := json.Marshal(eviction.Record{Shard: "x", Addr: addr, Started: rec.started, At: time.Now(), Hold: time.Minute, LeaseLeft: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := rec.cli.Put(ctx, layout.Eviction("x"), string(b)); err != nil {
		t.Fatal(err)
	}
	if acked, err := eviction.Ack(ctx, rec.cli, layout, "x", rec.started); !acked || err != nil {
		t.Fatalf("ack: %v, %v", acked, err)
	}
	rec.revoke(t)
	waitTakeovers(t, sg, "timeout")
	if n := x.pulls.Load(); n != 1 {
		t.Fatalf("%d pulls reached the evicted owner, want 1 (no last pull once it acknowledged)", n)
	}
}

// silentOwner is a shard's API whose ExportStream answers nothing, as
// across a cut that lasts.
type silentOwner struct {
	shardlimitv1.UnimplementedShardServer
	pulls atomic.Int32
}

func (x *silentOwner) ExportStream(_ *shardlimitv1.ExportStreamRequest, st grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]) error {
	x.pulls.Add(1)
	<-st.Context().Done()
	return st.Context().Err()
}
