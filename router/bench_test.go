package router_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/rpc/vtcodec"
	"github.com/shardlimit/shardlimit/shard/tracing"
	"github.com/shardlimit/shardlimit/shard/tracing/tracingtest"
)

// benchCheck measures the router's check path end to end: callers on
// 16 goroutines check distinct users (no over-limit cache hit, every check
// goes to the shard) through one router and one shard, over mTLS on
// loopback. trace, when not nil, starts the tracing of the router and
// the shard.
func benchCheck(b *testing.B, trace func(b *testing.B) *tracing.Provider) { benchChecks(b, trace, 1) }

// benchChecks is benchCheck with n checks per request (n users in a row);
// an op is one request.
func benchChecks(b *testing.B, trace func(b *testing.B) *tracing.Provider, n int) {
	rs, err := rules.Parse("bench.yaml", []byte(`
rules:
  - service: bench
    endpoint: "*"
    limit: 1000000000
    period: 1s
`))
	if err != nil {
		b.Fatal(err)
	}
	var p *tracing.Provider
	if trace != nil {
		p = trace(b)
	} else {
		p = &tracing.Provider{}
	}
	c := clustertest.New(b, etcdEndpoint, clustertest.Options{Shards: 1, Rules: rs,
		Router: func(o *router.Options) { o.Tracer = p.TracerProvider },
		Shard:  func(o *shard.Options) { o.Tracer = p.TracerProvider }})
	client := c.Client(0)
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			checks := make([]*shardlimitv1.Check, n)
			for i := range checks {
				checks[i] = &shardlimitv1.Check{Service: "bench", Endpoint: "/x", User: "u" + strconv.FormatInt(next.Add(1)%10000, 10)}
			}
			if _, err := client.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: checks}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	// The machine is shared: wall time per check swings with the other
	// load, the process's CPU time per check much less.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	_ = p.Shutdown(context.Background())
}

// BenchmarkCheck: the router's check path with tracing off (the default),
// and on at ratios 0 (nothing sampled) and 1, exporting over OTLP/gRPC to an in-process collector
// that discards what it receives.
func BenchmarkCheck(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) { benchCheck(b, nil) })
	for _, ratio := range []float64{0, 1} {
		b.Run(fmt.Sprintf("tracing=ratio%g", ratio), func(b *testing.B) {
			benchCheck(b, func(b *testing.B) *tracing.Provider {
				col := tracingtest.ServeDiscard(b, nil)
				o := tracing.DefaultOptions()
				o.Endpoint, o.Insecure, o.SampleRatio = col.Addr, true, ratio
				p, err := tracing.Start(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				return p
			})
		})
	}
}

// BenchmarkCheckCodec: the check path of BenchmarkCheck (tracing off)
// with gRPC's proto codec as protobuf's reflection and as vtprotobuf's
// generated code (shard/rpc/vtcodec, the default), in one run, with 1 and 100
// checks per request: allocs/op and cpu-ns/op (per request) count the
// bench's client, the router and the shard, all in this process.
func BenchmarkCheckCodec(b *testing.B) {
	for _, n := range []int{1, 100} {
		for _, vt := range []bool{false, true} {
			name := fmt.Sprintf("checks=%d/codec=protobuf", n)
			if vt {
				name = fmt.Sprintf("checks=%d/codec=vtproto", n)
			}
			b.Run(name, func(b *testing.B) {
				vtcodec.UseGenerated(vt)
				defer vtcodec.UseGenerated(true)
				benchChecks(b, nil, n)
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
