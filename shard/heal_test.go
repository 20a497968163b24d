package shard

import (
	"slices"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/member"
)

// Heal takes back a stuck partition at its second look, except one that
// a hand-off fenced here forwarding to a next owner still a member: that
// one waits healForwardedAfter for the switch. One forwarded to a shard
// that is no member any more (a joiner whose lease was lost before its
// switch) is taken back at once: its checks go nowhere (issue 24: the
// sources waited out heal's 5 to 10 s).
func TestHealTakesBackWhatIsForwardedNowhereAtOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	joiner := member.Member{ID: "shard-4", Addr: "10.0.0.4:7000"}
	restarted := member.Member{ID: "shard-4", Addr: "10.0.0.9:7000"} // same id, another process
	forwards := map[uint32]member.Member{2: joiner, 3: joiner, 4: joiner}
	forwardTo := func(p uint32) (member.Member, bool) {
		m, ok := forwards[p]
		return m, ok
	}
	since := map[uint32]time.Time{
		1: now.Add(-healEvery),          // not forwarded: at its second look
		2: now.Add(-healEvery),          // forwarded, second look
		3: now.Add(-healForwardedAfter), // forwarded, stuck for the whole wait
		4: now.Add(-healForwardedAfter + time.Millisecond),
	}
	parts := []uint32{1, 2, 3, 4}
	for _, c := range []struct {
		name    string
		members []member.Member
		want    []uint32
	}{
		{"the next owner is a member: its switch may come", []member.Member{{ID: "shard-1"}, joiner}, []uint32{1, 3}},
		{"the next owner is no member: nothing decides their checks", []member.Member{{ID: "shard-1"}}, []uint32{1, 2, 3, 4}},
		{"a member of that id at another address is another process", []member.Member{{ID: "shard-1"}, restarted}, []uint32{1, 2, 3, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := healable(slices.Clone(parts), since, now, forwardTo, c.members); !slices.Equal(got, c.want) {
				t.Errorf("heal takes back %v, want %v", got, c.want)
			}
		})
	}
}
