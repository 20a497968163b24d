package rebalance

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

type metrics struct {
	leader      prometheus.Gauge
	runs        *prometheus.CounterVec
	moves       prometheus.Counter
	lastSuccess prometheus.Gauge
	ratio       *prometheus.GaugeVec
	etcdUp      prometheus.Gauge
	evictions   prometheus.Counter
}

func newMetrics(reg *prometheus.Registry, interval time.Duration) *metrics {
	m := &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_rebalance_leader", Help: "1 while this instance leads the rebalance job.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_rebalance_runs_total", Help: "Runs by outcome: moved, balanced, skipped (could not read etcd or a shard), failed.",
		}, []string{"outcome"}),
		moves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardlimit_rebalance_moves_total", Help: "Partitions moved.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_rebalance_last_success_timestamp_seconds", Help: "When the last run that moved or found balance finished.",
		}),
		ratio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardlimit_rebalance_load_ratio", Help: "Max/mean shard load before and after the last planned run.",
		}, []string{"when"}),
		etcdUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_rebalance_etcd_up", Help: "1 when the last etcd call succeeded.",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardlimit_rebalance_unreachable_evictions_total",
			Help: "Shards the leader evicted because routers reported them unreachable (their leases revoked, their partitions taken over by live shards, kept from joining for --evict-hold); the leader's log names each.",
		}),
	}
	intervalGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shardlimit_rebalance_interval_seconds", Help: "The configured interval between runs.",
	})
	intervalGauge.Set(interval.Seconds())
	for _, o := range []string{"moved", "balanced", "skipped", "failed"} {
		m.runs.WithLabelValues(o)
	}
	reg.MustRegister(m.leader, m.runs, m.moves, m.lastSuccess, m.ratio, m.etcdUp, m.evictions, intervalGauge,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(rec *shardlimitv1.RunRecord) {
	m.runs.WithLabelValues(rec.Outcome).Inc()
	if rec.Outcome == "moved" || rec.Outcome == "balanced" {
		m.lastSuccess.Set(float64(rec.FinishedUnixNs) / 1e9)
		m.moves.Add(float64(len(rec.Moves)))
	}
	if rec.RatioBefore > 0 {
		m.ratio.WithLabelValues("before").Set(rec.RatioBefore)
		m.ratio.WithLabelValues("after").Set(rec.RatioAfter)
	}
}
