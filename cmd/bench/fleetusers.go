package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/router/client"
)

// The users load: distinct users, each checked once through the routers,
// under a counter rule whose window outlasts the measurement, so that
// every user's key is still held when the shards' memory is read.
const (
	usersService, usersEndpoint = "fleet", "/users"
	usersBatch                  = 1000 // checks per request: the router's default bound
	usersWorkers                = 16   // requests in flight
	// usersTries bounds the requests for one user: a check answered by
	// policy (a call past the router's deadline on a loaded machine)
	// stored nothing, and is sent again.
	usersTries = 5
)

// shardMemory is what one shard says about its memory: keys held, its
// estimate of their state's bytes, Go's live heap just after a collection
// (asked for through /debug/pprof/heap?gc=1), and its resident memory.
type shardMemory struct {
	keys, estimate, heap, rss float64
}

// readShardMemory reads every shard of c; the shards serve pprof
// (--pprof), so that a heap profile's gc=1 collects first.
func readShardMemory(c *cluster.Cluster) ([]shardMemory, error) {
	out := make([]shardMemory, len(c.Shards))
	for i, p := range c.Shards {
		if _, err := cluster.Fetch(p.Metrics, "/debug/pprof/heap?gc=1"); err != nil {
			return nil, fmt.Errorf("%s: collect: %w", p.Name, err)
		}
		page, err := cluster.FetchMetrics(p.Metrics)
		if err != nil {
			return nil, err
		}
		kb, err := procRSS(p.Pid())
		if err != nil {
			return nil, err
		}
		m := &out[i]
		m.keys, _ = page.Sum("shardlimit_shard_keys")
		m.estimate, _ = page.Sum("shardlimit_shard_memory_bytes")
		m.heap, _ = page.Sum("go_memstats_heap_alloc_bytes")
		m.rss = float64(kb) * 1024
	}
	return out, nil
}

// usersLoad checks users distinct users once each through c's routers,
// in requests of usersBatch checks, usersWorkers in flight; then it reads
// every shard's memory and writes, beside the same figures before the
// load, the memory per shard and per key.
func usersLoad(ctx context.Context, c *cluster.Cluster, users int, out io.Writer, say func(string, ...any)) error {
	before, err := readShardMemory(c)
	if err != nil {
		return err
	}
	cl, err := client.New(client.Options{Routers: c.RouterAddrs(), TLS: c.Security.OperatorTLS(), Timeout: 30 * time.Second, MaxAttempts: 1})
	if err != nil {
		return err
	}
	defer cl.Close()
	load0 := loadavg()
	var next, done, policy, denied, errs, unchecked atomic.Int64
	batches := int64((users + usersBatch - 1) / usersBatch)
	start := time.Now()
	stop := make(chan struct{})
	go func() { // progress every 10 s
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Second):
				say("fleet: users: %d of %d checked (%.0f/s, load %s)", done.Load(), users, float64(done.Load())/time.Since(start).Seconds(), loadavg())
			}
		}
	}()
	var wg sync.WaitGroup
	for range usersWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checks := make([]client.Check, 0, usersBatch)
			for ctx.Err() == nil {
				b := next.Add(1) - 1
				if b >= batches {
					return
				}
				checks = checks[:0]
				for u := b * usersBatch; u < min((b+1)*usersBatch, int64(users)); u++ {
					checks = append(checks, client.Check{Service: usersService, Endpoint: usersEndpoint, User: "user-" + strconv.FormatInt(u, 10), Hits: 1})
				}
				n := len(checks)
				for try := 0; len(checks) > 0 && try < usersTries && ctx.Err() == nil; try++ {
					ds, err := cl.CheckBatch(ctx, checks)
					if err != nil {
						errs.Add(1)
						continue
					}
					again := checks[:0]
					for i, d := range ds {
						switch {
						case d.FailurePolicy || d.FromFailureMode:
							policy.Add(1)
							again = append(again, checks[i])
						case !d.Allowed:
							denied.Add(1)
						}
					}
					checks = again
				}
				unchecked.Add(int64(len(checks)))
				done.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	close(stop)
	took := time.Since(start)
	if err := ctx.Err(); err != nil {
		return err
	}
	load1 := loadavg()
	say("fleet: users: %d checked in %v; reading the shards' memory", users, took.Round(time.Second))
	after, err := readShardMemory(c)
	if err != nil {
		return err
	}
	var keys, perShard, heapPer, estPer, rss []float64
	for i := range after {
		k := after[i].keys - before[i].keys
		keys = append(keys, after[i].keys)
		perShard = append(perShard, (after[i].heap-before[i].heap)/(1<<20))
		rss = append(rss, after[i].rss/(1<<20))
		if k > 0 {
			heapPer = append(heapPer, (after[i].heap-before[i].heap)/k)
			estPer = append(estPer, (after[i].estimate-before[i].estimate)/k)
		}
	}
	total := 0.0
	for _, k := range keys {
		total += k
	}
	fmt.Fprintf(out, "\n%d distinct users, each checked once (fixed window, 1 h) through %d routers onto %d shards, %d checks a request, %d in flight: %v, %.0f users/s (load %s → %s); checks answered by policy and sent again %d, users still unchecked after %d tries %d, denied %d, failed requests %d:\n\n",
		users, len(c.Routers), len(c.Shards), usersBatch, usersWorkers, took.Round(time.Second), float64(users)/took.Seconds(), load0, load1, policy.Load(), usersTries, unchecked.Load(), denied.Load(), errs.Load())
	fmt.Fprintf(out, "| what | p50 | min | max |\n| --- | ---: | ---: | ---: |\n")
	for _, row := range []struct {
		name   string
		vs     []float64
		format string
	}{
		{"keys per shard (all shards: " + strconv.FormatFloat(total, 'f', 0, 64) + ")", keys, "%.0f"},
		{"live heap per shard, growth over the load (MiB, after a GC)", perShard, "%.1f"},
		{"resident memory per shard after (MiB)", rss, "%.0f"},
		{"live heap growth per key (bytes)", heapPer, "%.1f"},
		{"the shard's own estimate per key (shardlimit_shard_memory_bytes, bytes)", estPer, "%.1f"},
	} {
		if len(row.vs) == 0 {
			continue
		}
		fmt.Fprintf(out, "| %s | "+row.format+" | "+row.format+" | "+row.format+" |\n", row.name, medianF(row.vs), slices.Min(row.vs), slices.Max(row.vs))
	}
	return nil
}
