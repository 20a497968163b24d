package robustness

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// ownerLog records which shard owned each partition over a run, as etcd
// said (members and shard map, through the owner function every router
// uses), so that the report can say whose users a policy answer was for.
// It only attributes; the checker judges nothing by it.
type ownerLog struct {
	mu    sync.Mutex
	at    []time.Time
	table [][]string // partition → owner id ("": none), from at[i] on
	stop  context.CancelFunc
	done  chan struct{}
}

// ownerPoll is how often the log reads etcd: the report places an answer
// by the table read last before it was sent, so an owner change shows up
// to this much late.
const ownerPoll = 100 * time.Millisecond

// watchOwners reads the table in force every ownerPoll until stop, and
// keeps each one that differs from the last. While etcd does not answer,
// the last table stands.
func watchOwners(cli *clientv3.Client, prefix string) *ownerLog {
	ctx, cancel := context.WithCancel(context.Background())
	l := &ownerLog{stop: cancel, done: make(chan struct{})}
	layout := etcd.Layout(prefix)
	go func() {
		defer close(l.done)
		tick := time.NewTicker(ownerPoll)
		defer tick.Stop()
		for {
			if owners, ok := readOwners(ctx, cli, layout); ok {
				l.mu.Lock()
				if n := len(l.table); n == 0 || !slices.Equal(l.table[n-1], owners) {
					l.at, l.table = append(l.at, time.Now()), append(l.table, owners)
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

func readOwners(ctx context.Context, cli *clientv3.Client, layout etcd.Layout) ([]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	members, _, err := membership.Read(ctx, cli, layout)
	if err != nil {
		return nil, false
	}
	m, _, err := mapstore.Load(ctx, cli, layout)
	if err != nil {
		return nil, false
	}
	t, err := shardmap.InForce(shardmap.DefaultConfig(), members, m)
	if err != nil {
		return nil, false
	}
	return t.Owners(), true
}

// close stops the reads.
func (l *ownerLog) close() {
	l.stop()
	<-l.done
}

// owner returns the shard that owned (service, rule, user)'s counter at
// t by the log ("" when no table was read yet or none owned it).
func (l *ownerLog) owner(service, rule, user string, t time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.at), func(i int) bool { return l.at[i].After(t) }) - 1
	if i < 0 {
		return ""
	}
	return l.table[i][key.Partition(key.Hash(service, rule, user), len(l.table[i]))]
}

// of returns the shard that owned o's key at t.
func (l *ownerLog) of(o op, t time.Time) string { return l.owner(o.service, o.Rule, o.user, t) }

// changes is how many tables the log kept.
func (l *ownerLog) changes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.table)
}
