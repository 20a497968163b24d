package eviction_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/etcdtest"
	"github.com/shardlimit/shardlimit/shard/eviction"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// The whole path over a real etcd: a router's report, the leader's read
// and decision, the eviction that revokes the member's lease (the member
// sees it lost), the hold that keeps it from joining until the record
// goes, and the report that goes with the router's lease.
func TestReportEvictHold(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	defer cancel()
	layout := etcd.Layout("/evict/")
	log := slog.New(slog.DiscardHandler)

	lost := map[string]chan struct{}{}
	started := time.Now()
	for _, id := range []string{"a", "b"} {
		lost[id] = make(chan struct{})
		done := lost[id]
		reg, err := membership.RegisterUntilLost(ctx, cli, layout, member.Member{ID: id, Addr: id + ":1", State: member.Serving, Started: started}, 30*time.Second, log,
			func() { close(done) })
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close(context.Background())
	}

	st, bad, err := eviction.Read(ctx, cli, layout)
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	if v := eviction.Decide(st.Reports, st.Members, st.Evicting()); v.Evict() {
		t.Fatalf("evicts %s with no report", v.Member.ID)
	}

	rep := eviction.NewReporter(cli, layout, 5*time.Second, log)
	want := map[string]eviction.Report{"b": {Shard: "b", Addr: "b:1", Router: "router-1", Since: time.Now(), Reaches: 1}}
	if err := rep.Set(ctx, want); err != nil {
		t.Fatal(err)
	}
	if st, _, err = eviction.Read(ctx, cli, layout); err != nil {
		t.Fatal(err)
	}
	v := eviction.Decide(st.Reports, st.Members, st.Evicting())
	if !v.Evict() || v.Member.ID != "b" {
		t.Fatalf("verdict %+v, want b evicted", v)
	}
	rec, err := eviction.Evict(ctx, cli, layout, v, time.Minute, "leader-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Shard != "b" || len(rec.Routers) != 1 || rec.Routers[0] != "router-1" {
		t.Errorf("record %+v", rec)
	}
	// What b's lease had left, rounded up: at most its TTL and a second.
	if rec.LeaseLeft <= 0 || rec.LeaseLeft > 31*time.Second {
		t.Errorf("lease left %v, want in (0, 31s]", rec.LeaseLeft)
	}
	// A taker whose pull from b went unanswered waits out b's lease, unless
	// b acknowledged its eviction; one from another address does not wait.
	if _, why := eviction.OutwaitEvicted(ctx, cli, layout, eviction.Registered{ID: "b", Addr: "b:2", Started: started}, time.Now(), time.Minute); why != "not evicted" {
		t.Errorf("an owner at another address: %s, want not evicted", why)
	}
	if _, why := eviction.OutwaitEvicted(ctx, cli, layout, eviction.Registered{ID: "b", Addr: "b:1", Started: started}, time.Now().Add(-rec.LeaseLeft-time.Second), time.Second); why != "its lease ran out" {
		t.Errorf("past b's lease: %s, want its lease ran out", why)
	}
	if acked, err := eviction.Ack(ctx, cli, layout, "b", started.Add(time.Second)); acked || err != nil {
		t.Errorf("a later process of b acknowledged b's eviction: %v, %v", acked, err)
	}
	if acked, err := eviction.Ack(ctx, cli, layout, "b", started); !acked || err != nil {
		t.Fatalf("b could not acknowledge its eviction: %v, %v", acked, err)
	}
	if _, why := eviction.OutwaitEvicted(ctx, cli, layout, eviction.Registered{ID: "b", Addr: "b:1", Started: started}, time.Now(), time.Minute); why != "acknowledged" {
		t.Errorf("after b's acknowledgement: %s, want acknowledged", why)
	}
	// A process of b started since at its address: neither the eviction
	// nor its acknowledgement is its own.
	if _, why := eviction.OutwaitEvicted(ctx, cli, layout, eviction.Registered{ID: "b", Addr: "b:1", Started: started.Add(time.Second)}, time.Now(), time.Minute); why != "not evicted" {
		t.Errorf("a process started since at b's address: %s, want not evicted", why)
	}
	select {
	case <-lost["b"]:
	case <-ctx.Done():
		t.Fatal("b never saw its lease lost")
	}
	select {
	case <-lost["a"]:
		t.Fatal("a lost its lease too")
	default:
	}
	// A second verdict on the same reports evicts nobody: b is gone, and
	// its eviction is in force.
	if st, _, err = eviction.Read(ctx, cli, layout); err != nil {
		t.Fatal(err)
	}
	if v := eviction.Decide(st.Reports, st.Members, st.Evicting()); v.Evict() {
		t.Fatalf("evicts %s while b's eviction is in force", v.Member.ID)
	}
	// Evicting the judged registration again changes nothing: it is gone.
	if _, err := eviction.Evict(ctx, cli, layout, v, time.Minute, "leader-1", time.Now()); !errors.Is(err, eviction.ErrChanged) {
		t.Errorf("evicting a registration that is gone: %v, want ErrChanged", err)
	}

	// A process of b started after the eviction is not held.
	if err := eviction.WaitCleared(ctx, cli, layout, "b", started.Add(time.Second), func(r eviction.Record) {
		t.Errorf("a later process of b held by %+v", r)
	}); err != nil {
		t.Fatal(err)
	}
	// The process evicted waits while its record holds, and goes on once
	// it is gone.
	cleared := make(chan error, 1)
	held := make(chan eviction.Record, 1)
	go func() {
		cleared <- eviction.WaitCleared(ctx, cli, layout, "b", started, func(r eviction.Record) {
			select {
			case held <- r:
			default:
			}
		})
	}()
	if r := <-held; r.Shard != "b" || r.Hold != time.Minute {
		t.Errorf("held by %+v", r)
	}
	select {
	case err := <-cleared:
		t.Fatalf("WaitCleared returned while the record holds: %v", err)
	default:
	}
	if _, err := cli.Delete(ctx, layout.Eviction("b")); err != nil {
		t.Fatal(err)
	}
	if err := <-cleared; err != nil {
		t.Fatal(err)
	}

	// The reports go with the reporter's lease.
	rep.Close()
	poll.Until(t, 30*time.Second, func() error {
		st, _, err := eviction.Read(ctx, cli, layout)
		if err == nil && len(st.Reports) > 0 {
			return fmt.Errorf("reports left: %+v", st.Reports)
		}
		return err
	})
}

// A report written before its shard registered again at the same address
// does not count (it may be about the earlier registration), until the
// reporter writes it again, which it does once per lease TTL.
func TestAReportIsWrittenAgainForANewRegistration(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	defer cancel()
	layout := etcd.Layout("/again/")
	log := slog.New(slog.DiscardHandler)
	register := func(id string) *membership.Registration {
		reg, err := membership.RegisterUntilLost(ctx, cli, layout, member.Member{ID: id, Addr: id + ":1", State: member.Serving, Started: time.Now()}, 30*time.Second, log, func() {})
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	defer register("a").Close(context.Background())
	b := register("b")

	rep := eviction.NewReporter(cli, layout, time.Second, log)
	defer rep.Close()
	want := map[string]eviction.Report{"b": {Shard: "b", Addr: "b:1", Router: "router-1", Since: time.Now(), Reaches: 1}}
	if err := rep.Set(ctx, want); err != nil {
		t.Fatal(err)
	}
	// b registers again, at the same address, after the report.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	defer register("b").Close(context.Background())
	verdict := func() eviction.Verdict {
		st, _, err := eviction.Read(ctx, cli, layout)
		if err != nil {
			t.Fatal(err)
		}
		return eviction.Decide(st.Reports, st.Members, st.Evicting())
	}
	if v := verdict(); v.Evict() {
		t.Fatalf("a report older than b's registration evicts %s", v.Member.ID)
	}
	poll.Until(t, 30*time.Second, func() error {
		if err := rep.Set(ctx, want); err != nil {
			return err
		}
		if v := verdict(); !v.Evict() || v.Member.ID != "b" {
			return fmt.Errorf("verdict %+v, want b evicted", v)
		}
		return nil
	})
}
