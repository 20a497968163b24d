package episodes

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// t0 is the explicit start of the tests, in Unix ns.
const t0 = int64(1_700_000_000_000_000_000)

const sec = int64(time.Second)

func newLog(t testing.TB, o Options) *Log {
	t.Helper()
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func key(i int) Key {
	return Key{Hi: uint64(i) * 0x9e3779b97f4a7c15, Lo: uint64(i) * 0xbf58476d1ce4e5b9}
}

func TestOptions(t *testing.T) {
	if _, err := New(Options{Capacity: -1}); !errors.Is(err, ErrOptions) {
		t.Fatalf("Capacity -1: err %v, want ErrOptions", err)
	}
	l := newLog(t, Options{})
	if l.capacity != 10000 || l.merge != 10*sec {
		t.Fatalf("defaults: capacity %d merge %d", l.capacity, l.merge)
	}
	if l := newLog(t, Options{Merge: -1}); l.merge != 0 {
		t.Fatalf("Merge -1: merge %d, want 0", l.merge)
	}
}

// step is one call of a table test: at is an offset from t0.
type step struct {
	op  string // begin, deny, end, sweep
	key int
	at  int64
}

func run(l *Log, steps []step) {
	for _, s := range steps {
		k, now := key(s.key), t0+s.at
		switch s.op {
		case "begin":
			l.Begin(k, fmt.Sprint("svc", s.key%2), "/e", fmt.Sprint("user", s.key), "r", now)
		case "deny":
			l.Deny(k, now)
		case "end":
			l.End(k, now)
		case "sweep":
			l.Sweep(now)
		default:
			panic(s.op)
		}
	}
}

// ep is the part of an Episode a table checks; times are offsets from t0,
// and ended −1 means open.
type ep struct {
	user               string
	began, ended, last int64
	denied             uint64
}

func brief(es []Episode) []ep {
	out := make([]ep, len(es))
	for i, e := range es {
		ended := int64(-1)
		if e.Ended != 0 {
			ended = e.Ended - t0
		}
		out[i] = ep{e.User, e.Began - t0, ended, e.LastDenied - t0, e.Denied}
	}
	return out
}

func TestEpisodes(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		steps   []step
		service string
		from    int64
		to      int64
		limit   int
		want    []ep
		len     int
		dropped uint64
	}{
		{
			name:  "open episode counts denials",
			steps: []step{{"begin", 1, 0}, {"deny", 1, sec}, {"deny", 1, 2 * sec}},
			from:  0, to: 10 * sec, service: "svc1",
			want: []ep{{"user1", 0, -1, 2 * sec, 3}},
			len:  1,
		},
		{
			name:  "end closes; deny after end is ignored",
			opts:  Options{Merge: -1},
			steps: []step{{"begin", 1, 0}, {"deny", 1, sec}, {"end", 1, 5 * sec}, {"deny", 1, 6 * sec}},
			to:    10 * sec, service: "svc1",
			want: []ep{{"user1", 0, 5 * sec, sec, 2}},
			len:  1,
		},
		{
			name:  "deny and end without begin do nothing",
			steps: []step{{"deny", 1, 0}, {"end", 1, sec}},
			to:    10 * sec,
			want:  []ep{},
		},
		{
			name:  "begin of an open episode is one more denial",
			steps: []step{{"begin", 1, 0}, {"begin", 1, sec}},
			to:    10 * sec,
			want:  []ep{{"user1", 0, -1, sec, 2}},
			len:   1,
		},
		{
			name: "begin within merge reopens",
			opts: Options{Merge: time.Duration(2 * sec)},
			steps: []step{
				{"begin", 1, 0}, {"end", 1, sec},
				{"begin", 1, 3 * sec}, // exactly Merge after: reopens
				{"end", 1, 4 * sec},
				{"begin", 1, 6*sec + 1}, // just past Merge: a new episode
			},
			to:   10 * sec,
			want: []ep{{"user1", 6*sec + 1, -1, 6*sec + 1, 1}, {"user1", 0, 4 * sec, 3 * sec, 2}},
			len:  2,
		},
		{
			name: "service filter, overlap and newest first",
			opts: Options{Merge: -1},
			steps: []step{
				{"begin", 1, 0}, {"end", 1, 10 * sec}, // svc1 [0, 10]
				{"begin", 3, 20 * sec}, {"end", 3, 30 * sec}, // svc1 [20, 30]
				{"begin", 5, 40 * sec}, // svc1 [40, open)
				{"begin", 2, 15 * sec}, // svc0
			},
			service: "svc1", from: 10 * sec, to: 40 * sec,
			want: []ep{
				{"user5", 40 * sec, -1, 40 * sec, 1},
				{"user3", 20 * sec, 30 * sec, 20 * sec, 1},
				{"user1", 0, 10 * sec, 0, 1},
			},
			len: 4,
		},
		{
			name: "window excludes episodes outside",
			opts: Options{Merge: -1},
			steps: []step{
				{"begin", 1, 0}, {"end", 1, 10 * sec},
				{"begin", 3, 50 * sec},
			},
			service: "svc1", from: 11 * sec, to: 49 * sec,
			want: []ep{},
			len:  2,
		},
		{
			name: "empty service lists all; limit",
			opts: Options{Merge: -1},
			steps: []step{
				{"begin", 1, 0}, {"begin", 2, sec}, {"begin", 3, 2 * sec},
			},
			to: 10 * sec, limit: 2,
			want: []ep{{"user3", 2 * sec, -1, 2 * sec, 1}, {"user2", sec, -1, sec, 1}},
			len:  3,
		},
		{
			name: "full log drops the oldest closed first",
			opts: Options{Capacity: 3, Merge: -1},
			steps: []step{
				{"begin", 1, 0}, {"end", 1, sec},
				{"begin", 3, 2 * sec}, {"end", 3, 3 * sec},
				{"begin", 5, 4 * sec},
				{"begin", 7, 5 * sec},  // drops user1's
				{"begin", 9, 6 * sec},  // drops user3's
				{"begin", 11, 7 * sec}, // all open: drops the oldest, user5's
				{"deny", 5, 8 * sec},   // user5's is gone: nothing to count
				{"end", 5, 9 * sec},
			},
			to: 10 * sec,
			want: []ep{
				{"user11", 7 * sec, -1, 7 * sec, 1},
				{"user9", 6 * sec, -1, 6 * sec, 1},
				{"user7", 5 * sec, -1, 5 * sec, 1},
			},
			len: 3, dropped: 3,
		},
		{
			name: "a closing episode counts as open until swept",
			opts: Options{Capacity: 2, Merge: time.Duration(5 * sec)},
			steps: []step{
				{"begin", 1, 0}, {"end", 1, sec},
				{"begin", 3, 2 * sec},
				{"begin", 5, 3 * sec}, // user1's, still closing, is the oldest
				{"sweep", 0, 7 * sec},
				{"begin", 7, 8 * sec}, // none closed: user3's goes
				{"begin", 3, 9 * sec}, // user3 again: a new episode
			},
			to: 10 * sec,
			want: []ep{
				{"user3", 9 * sec, -1, 9 * sec, 1},
				{"user7", 8 * sec, -1, 8 * sec, 1},
			},
			len: 2, dropped: 3,
		},
		{
			name:  "end before begin's time is clamped to it",
			opts:  Options{Merge: -1},
			steps: []step{{"begin", 1, 5 * sec}, {"end", 1, 4 * sec}},
			to:    10 * sec,
			want:  []ep{{"user1", 5 * sec, 5 * sec, 5 * sec, 1}},
			len:   1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLog(t, c.opts)
			run(l, c.steps)
			got := brief(l.List(c.service, t0+c.from, t0+c.to, c.limit))
			if !slices.Equal(got, c.want) {
				t.Errorf("List:\n got %+v\nwant %+v", got, c.want)
			}
			if l.Len() != c.len || l.Dropped() != c.dropped {
				t.Errorf("Len %d Dropped %d, want %d %d", l.Len(), l.Dropped(), c.len, c.dropped)
			}
		})
	}
}

// TestRingWraps fills and refills a small log many times over.
func TestRingWraps(t *testing.T) {
	const capacity = 50
	l := newLog(t, Options{Capacity: capacity, Merge: -1})
	for i := range 1000 {
		now := t0 + int64(i)*sec
		l.Begin(key(i), "s", "/e", fmt.Sprint(i), "r", now)
		l.End(key(i), now+1)
		if l.Len() > capacity {
			t.Fatalf("after %d: Len %d over capacity", i, l.Len())
		}
	}
	got := l.List("s", t0, t0+1000*sec, 0)
	if len(got) != capacity || l.Dropped() != 1000-capacity {
		t.Fatalf("kept %d, dropped %d", len(got), l.Dropped())
	}
	for i, e := range got {
		if want := fmt.Sprint(999 - i); e.User != want {
			t.Fatalf("episode %d is user %s, want %s (newest first)", i, e.User, want)
		}
	}
}

func TestStringsAreCopied(t *testing.T) {
	l := newLog(t, Options{})
	buf := []byte("svc/endpoint/user/rule")
	s := string(buf) // one allocation the caller might reuse
	l.Begin(key(1), s[:3], s[4:12], s[13:17], s[18:], t0)
	e := l.List("svc", t0, t0, 0)[0]
	if e.Service != "svc" || e.Endpoint != "endpoint" || e.User != "user" || e.Rule != "rule" {
		t.Fatalf("episode %+v", e)
	}
}

func TestJSON(t *testing.T) {
	e := Episode{ID: 7, Service: "s", Endpoint: "/e", User: "u", Rule: "r", Began: 1, LastDenied: 2, Denied: 3}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":7,"service":"s","endpoint":"/e","user":"u","rule":"r","began":1,"ended":0,"last_denied":2,"denied":3}`
	if string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
}

func TestDenyAllocatesNothing(t *testing.T) {
	l := newLog(t, Options{})
	for i := range 1000 {
		l.Begin(key(i), "s", "/e", "u", "r", t0)
	}
	i, now := 0, t0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		now++
		l.Deny(key(i%2000), now) // half have an episode, half not
	})
	if allocs != 0 {
		t.Fatalf("Deny allocates %.1f times", allocs)
	}
}

// A flood of limited keys cannot blind the log: closed episodes go first,
// then the oldest open ones, the newest are always listed, each drop is
// counted by reason, and the log's memory stays bounded.
func TestFullLogDropsClosedThenOldestOpen(t *testing.T) {
	const capacity = 100
	l := newLog(t, Options{Capacity: capacity, Merge: -1})
	for i := range 50 {
		l.Begin(key(i), "s", "/e", fmt.Sprint(i), "r", t0+int64(i))
		l.End(key(i), t0+int64(i)+1)
	}
	const flood = 10_000
	for i := 50; i < 50+flood; i++ {
		now := t0 + int64(i)*sec
		l.Begin(key(i), "s", "/e", fmt.Sprint(i), "r", now)
		l.Deny(key(i), now)
		if i%1000 == 0 {
			l.Sweep(now)
		}
	}
	if got := l.DroppedBy(); got[DropClosed] != 50 || got[DropOpen] != flood-capacity {
		t.Fatalf("dropped %v, want 50 closed then %d open", got, flood-capacity)
	}
	got := l.List("s", t0, t0+int64(100*flood)*sec, 0)
	if len(got) != capacity || l.Len() != capacity {
		t.Fatalf("listed %d, Len %d; want %d", len(got), l.Len(), capacity)
	}
	for i, e := range got {
		if want := fmt.Sprint(50 + flood - 1 - i); e.User != want || e.Denied != 2 || e.Ended != 0 {
			t.Fatalf("episode %d: %+v, want user %s open and denied twice", i, e, want)
		}
	}
	l.mu.Lock()
	order := cap(l.order)
	l.mu.Unlock()
	held := 0
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		l.settle(st, t0)
		held += st.live
		st.mu.Unlock()
	}
	if order > 8*capacity || held != capacity {
		t.Fatalf("the order holds room for %d, the stripes %d records; want about %d", order, held, capacity)
	}
}
