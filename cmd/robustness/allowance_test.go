package robustness

import (
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/cmd/robustness/checker"
)

var base = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

// Only a fault that may restart counters is a reset, spanning its lease
// and takeover after the heal.
func TestResetsAreTheFaultsThatLoseCounters(t *testing.T) {
	as := []applied{
		{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"shard-1"}}, from: sec(0), to: sec(5), reset: true},
		{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-1"}}, from: sec(1), to: sec(6)},
	}
	rs := resets(as, 10*time.Second)
	if len(rs) != 1 || rs[0].Name != "sigkill shard-1" || !rs[0].From.Equal(sec(0)) || !rs[0].To.Equal(sec(25)) {
		t.Fatalf("resets: %+v, want sigkill shard-1 over [0 s, 25 s]", rs)
	}
}

func TestMayReset(t *testing.T) {
	lease := 10 * time.Second
	for _, c := range []struct {
		s    Step
		want bool
	}{
		{Step{Kind: Signal, Signal: "sigkill", Targets: []string{"shard-2"}, For: time.Second}, true},
		{Step{Kind: Signal, Signal: "sigstop", Targets: []string{"shard-2"}, For: 6 * time.Second}, true},
		{Step{Kind: Signal, Signal: "sigstop", Targets: []string{"shard-2"}, For: 4 * time.Second}, false},
		{Step{Kind: Signal, Signal: "sigterm", Targets: []string{"shard-2"}, For: 16 * time.Second}, false},
		{Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-1"}, For: time.Second}, false},
		{Step{Kind: Signal, Signal: "sigkill", Targets: []string{"etcd"}, For: 16 * time.Second}, false},
		{Step{Kind: Split, Targets: []string{"shard-1", "router-2"}, Sep: 2, For: 6 * time.Second}, true},
		{Step{Kind: Split, Targets: []string{"shard-1", "router-2"}, Sep: 2, For: 4 * time.Second}, false},
		{Step{Kind: CutShardEtcd, Targets: []string{"shard-1"}, For: 16 * time.Second}, false},
		{Step{Kind: CutRoutersShard, Targets: []string{"shard-1"}, For: 16 * time.Second}, false},
	} {
		if got := MayReset(c.s, lease); got != c.want {
			t.Errorf("%s for %v: %v, want %v", c.s.Name(), c.s.For, got, c.want)
		}
	}
}

// An error is excused only for a check of the router that was down (the
// Go client's: of either), in flight or sent while it was down, or within
// routerMargin after.
func TestExcusedErrorsAreThoseOfARouterDown(t *testing.T) {
	as := []applied{{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-2"}}, from: sec(10), to: sec(20)}}
	check := func(router int, send, recv float64) op {
		return op{Op: checker.Op{Send: sec(send), Recv: sec(recv), Outcome: checker.Error}, router: router}
	}
	for _, c := range []struct {
		o    op
		want bool
	}{
		{check(1, 5, 12), true},     // router-2, in flight when it was killed
		{check(1, 15, 15.1), true},  // router-2, while down
		{check(1, 25, 26), true},    // router-2, within the margin after
		{check(1, 31, 32), false},   // router-2, past the margin
		{check(0, 15, 15.1), false}, // router-1 was up
		{check(-1, 15, 45), true},   // the Go client, which may have picked router-2
		{check(1, 1, 2), false},     // before the fault
	} {
		if got := excused(c.o, as); got != c.want {
			t.Errorf("router %d, sent %v, received %v: excused %v, want %v", c.o.router, c.o.Send.Sub(base), c.o.Recv.Sub(base), got, c.want)
		}
	}
}
