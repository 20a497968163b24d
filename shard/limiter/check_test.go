package limiter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Every state an algorithm leaves passes CheckState; the states a made-up
// hand-off could carry are refused, naming the field.
func TestCheckStateAcceptsWhatAlgorithmsLeave(t *testing.T) {
	const now = int64(1_700_000_000) * 1e9
	for _, a := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, GCRA} {
		for _, r := range []Rule{
			{Algorithm: a, Limit: 3, Period: int64(time.Second)},
			{Algorithm: a, Limit: 7, Period: int64(time.Minute), SoftPercent: 50},
			{Algorithm: a, Limit: 1_000_000, Period: int64(time.Hour), ElasticPercent: 100, ElasticLoadPercent: 50},
		} {
			if a.UsesBurst() {
				r.Burst = r.Limit * 5
			}
			var s State
			for i := range 200 {
				DecideLoad(&s, now+int64(i)*int64(time.Millisecond), &r, int64(1+i%3), 0.1)
				if err := CheckState(a, s, now+int64(i)*int64(time.Millisecond)); err != nil {
					t.Fatalf("%v %+v after %d decisions: %+v: %v", a, r, i+1, s, err)
				}
			}
		}
	}
	var l Log
	r := Rule{Algorithm: SlidingLog, Limit: 5, Period: int64(time.Second)}
	l.Times = make([]int64, r.LogSize())
	for i := range 50 {
		DecideLog(&l, now+int64(i)*int64(50*time.Millisecond), &r, 1, 0)
	}
	if err := CheckLog(l.Snapshot(), now+int64(50*50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
}

func TestCheckStateRefusesImpossibleStates(t *testing.T) {
	const now = int64(1_700_000_000) * 1e9
	day := int64(24 * time.Hour)
	for _, tc := range []struct {
		a     Algorithm
		s     State
		field string
	}{
		{FixedWindow, State{A: now - now%1e9, B: -5}, "b:"}, // the attack: remaining 4.6e18
		{FixedWindow, State{A: now, B: MaxEffectiveLimit + 1}, "b:"},
		{FixedWindow, State{A: now + day, B: 1}, "a:"},
		{FixedWindow, State{A: -1, B: 1}, "a:"},
		{SlidingWindow, State{A: now + day, B: 1}, "a:"},
		{TokenBucket, State{A: -1}, "a:"},
		{GCRA, State{A: now + 5*int64(MaxSpan)}, "a:"},
		{LeakyBucket, State{A: now, B: 3<<32 | 3}, "b:"}, // remainder not under its limit
		{TokenBucket, State{A: now, B: 7}, "b:"},         // a remainder without a limit
		{SlidingLog, State{}, "algorithm:"},
	} {
		err := CheckState(tc.a, tc.s, now)
		if !errors.Is(err, ErrImpossibleState) || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%v %+v: %v, want ErrImpossibleState naming %s", tc.a, tc.s, err, tc.field)
		}
	}
	for _, tc := range []struct {
		times []int64
		field string
	}{
		{[]int64{now, now - 1}, "times[1]"},
		{[]int64{-1}, "times[0]"},
		{[]int64{now, now + day}, "times[1]"},
		{make([]int64, MaxLogSize+1), "times:"},
	} {
		if err := CheckLog(tc.times, now); !errors.Is(err, ErrImpossibleState) || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("log %v: %v, want ErrImpossibleState naming %s", len(tc.times), err, tc.field)
		}
	}
	for _, fresh := range []int64{-1, now + 5*int64(MaxSpan)} {
		if err := CheckFresh(fresh, now); !errors.Is(err, ErrImpossibleState) {
			t.Errorf("fresh %d: %v", fresh, err)
		}
	}
	if err := CheckFresh(now+int64(time.Hour), now); err != nil {
		t.Error(err)
	}
}
