package membership_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/poll"
)

var endpoint string

func TestMain(m *testing.M) { os.Exit(embedded.RunTests(m, &endpoint)) }

func dial(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := etcd.Dial([]string{endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// watcher records the lists Watch delivers: the last one, and every one
// seen, so that a test can wait for a state that lasts only a moment.
type watcher struct {
	mu   sync.Mutex
	last []member.Member
	seen map[string]bool
}

func (w *watcher) set(ms []member.Member) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = ms
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	w.seen[idsOf(ms)] = true
}

func (w *watcher) ids() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return idsOf(w.last)
}

func idsOf(ms []member.Member) string {
	s := ""
	for _, m := range ms {
		s += m.ID + ","
	}
	return s
}

// forget clears the lists seen so far.
func (w *watcher) forget() { w.mu.Lock(); w.seen = nil; w.mu.Unlock() }

// waitSeen waits until Watch has delivered want since the last forget,
// however briefly it lasted.
func waitSeen(t *testing.T, w *watcher, want string) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.seen[want] {
			return fmt.Errorf("members %q not seen (last %q)", want, idsOf(w.last))
		}
		return nil
	})
}

func waitIDs(t *testing.T, w *watcher, want string) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		if got := w.ids(); got != want {
			return fmt.Errorf("members %q, want %q", got, want)
		}
		return nil
	})
}

func TestRegisterWatchReRegisterAndClose(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	cli := dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watcher{}
	go membership.Watch(ctx, cli, etcd.Layout(prefix), slog.New(slog.DiscardHandler), w.set)

	// a's lease is the one the test revokes: 10s, which no stall of a
	// loaded machine outlasts; a revoke the client retried after the
	// server applied it finds no lease, which etcd.Revoke takes as
	// revoked. b's expires when abandoned.
	a, err := membership.Register(ctx, dial(t), etcd.Layout(prefix), member.Member{ID: "a", Addr: "127.0.0.1:1"}, 10*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b, err := membership.Register(ctx, dial(t), etcd.Layout(prefix), member.Member{ID: "b", Addr: "127.0.0.1:2"}, 3*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	waitIDs(t, w, "a,b,")

	// A second live member with the same id is refused.
	if _, err := membership.Register(ctx, dial(t), etcd.Layout(prefix), member.Member{ID: "a", Addr: "127.0.0.1:3"}, time.Second, slog.New(slog.DiscardHandler)); !errors.Is(err, membership.ErrDuplicateID) {
		t.Fatalf("duplicate id: got %v", err)
	}

	// Losing the lease (revoked behind the member's back, as after a long
	// etcd outage) makes the member register again.
	resp, err := cli.Get(ctx, etcd.Layout(prefix).Member("a"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get a: %v", err)
	}
	w.forget()
	if err := etcd.Revoke(ctx, cli, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, w, "b,") // a registers again at once: "b," may last a moment
	waitIDs(t, w, "a,b,")

	// Close deregisters at once; Abandon leaves the lease to expire.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitIDs(t, w, "b,")
	b.Abandon()
	waitIDs(t, w, "")
}

func TestRegisterRejectsBadMembers(t *testing.T) {
	cli := dial(t)
	for _, tc := range []struct {
		m    member.Member
		ttl  time.Duration
		want string
	}{
		{member.Member{Addr: "x:1"}, time.Second, "member id: must not be empty"},
		{member.Member{ID: "a/b", Addr: "x:1"}, time.Second, "must not contain '/'"},
		{member.Member{ID: "a"}, time.Second, "member addr: must not be empty"},
		{member.Member{ID: "a", Addr: "x:1"}, 500 * time.Millisecond, "lease ttl: 500ms is under the minimum of 1s"},
	} {
		_, err := membership.Register(context.Background(), cli, etcd.Layout("/test/bad/"), tc.m, tc.ttl, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.m, err, tc.want)
		}
	}
}

// A member that crashed and restarts at once finds its old record still
// held by the old lease: it waits for the lease to expire, then registers.
func TestRestartWithinTheLeaseWaitsForIt(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	old, err := membership.Register(context.Background(), dial(t), etcd.Layout(prefix), member.Member{ID: "a", Addr: "127.0.0.1:1"}, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	old.Abandon() // crashed: the lease lives on until its TTL
	start := time.Now()
	again, err := membership.Register(context.Background(), dial(t), etcd.Layout(prefix), member.Member{ID: "a", Addr: "127.0.0.1:2"}, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("restart within the lease: %v", err)
	}
	defer again.Close(context.Background())
	t.Logf("registered again after %v", time.Since(start).Round(time.Millisecond))
}

// With RegisterUntilLost a lost lease is not registered again: the record
// stays gone, onLost is called once, and Close has nothing to revoke.
func TestRegisterUntilLostCallsBackInstead(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	cli := dial(t)
	ctx := context.Background()
	lost := make(chan struct{}, 2)
	r, err := membership.RegisterUntilLost(ctx, dial(t), etcd.Layout(prefix), member.Member{ID: "a", Addr: "127.0.0.1:1", State: member.Joining}, 10*time.Second,
		slog.New(slog.DiscardHandler), func() { lost <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Update(ctx, member.Member{ID: "a", Addr: "127.0.0.1:1", State: member.Serving}); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, etcd.Layout(prefix).Member("a"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get a: %v", err)
	}
	if m, err := member.Decode("a", resp.Kvs[0].Value); err != nil || m.State != member.Serving {
		t.Fatalf("record after Update: %+v, %v", m, err)
	}
	// Revoked behind its back: seen at once through the deleted record,
	// long before the next keep-alive of a 10s lease would tell (a 5s one
	// could expire on its own on a loaded machine, and the revoke find none).
	if err := etcd.Revoke(ctx, cli, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("onLost not called within 10s of the lease's revocation")
	}
	if !r.Lost() {
		t.Fatal("Lost() is false after onLost")
	}
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close after a lost lease: %v", err)
	}
	if resp, err := cli.Get(ctx, etcd.Layout(prefix).Member("a")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the record came back after a lost lease: %v %v", resp.Kvs, err)
	}
	if len(lost) != 0 {
		t.Fatal("onLost called more than once")
	}
}
