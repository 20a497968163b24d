package shard

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/shardlimit/shardlimit/shard/episodes"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Decision results, the values of the result label.
const (
	resultAllowed = iota
	resultDenied
	resultShadowDenied
	results
)

var resultNames = [results]string{"allowed", "denied", "shadow_denied"}

// metrics are the shard's Prometheus metrics. Decision counters are
// resolved once per (algorithm, result) so that a batch adds to them
// without label lookups.
type metrics struct {
	decisions  [limiter.GCRA + 1][results]prometheus.Counter
	duration   prometheus.Histogram
	setup      prometheus.Gauge
	registered prometheus.Gauge
	evicted    prometheus.Gauge
	// leaseSuspended is 1 while the lease guard stops every decision.
	leaseSuspended prometheus.Gauge
	etcdUp         prometheus.Gauge
	notDecided     prometheus.Counter
	// forwarded counts the checks forwarded to a next owner, by
	// forwardResults.
	forwarded *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shardlimit_shard_decision_duration_seconds",
			Help:    "Time to decide one batch of checks on the shard.",
			Buckets: []float64{1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.01},
		}),
		setup: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_shard_setup_seconds",
			Help: "Host setup time: process start to serving and registered in etcd.",
		}),
		registered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_shard_registered", Help: "1 while the shard is registered in etcd under its lease.",
		}),
		leaseSuspended: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_shard_lease_suspended", Help: "1 while the shard decides nothing because its membership lease is unconfirmed past its time and a peer does not answer (a shard that cannot fence it may have taken its partitions over).",
		}),
		evicted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_shard_held_out", Help: "1 while the shard is kept from joining by an eviction record: routers reported it unreachable and the rebalance leader evicted it, for --evict-hold.",
		}),
		etcdUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_shard_etcd_up", Help: "1 when etcd answered the last health probe.",
		}),
		notDecided: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardlimit_shard_not_decided_total",
			Help: "Checks the shard did not decide because their partition is not decided here now (taken over after a lost lease, fenced, or not owned yet); routers answer them by policy.",
		}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_shard_forwarded_checks_total",
			Help: "Checks of partitions a planned hand-off fenced here, forwarded to their next owner, by result: decided there, not_decided there, or error (the forward failed; routers answer them by policy).",
		}, []string{"result"}),
	}
	for _, r := range forwardResults {
		m.forwarded.WithLabelValues(r)
	}
	dec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_shard_decisions_total",
		Help: "Checks decided on the shard, by algorithm and result (allowed, denied, shadow_denied).",
	}, []string{"algorithm", "result"})
	for a := limiter.TokenBucket; a <= limiter.GCRA; a++ {
		for r := range results {
			m.decisions[a][r] = dec.WithLabelValues(a.String(), resultNames[r])
		}
	}
	reg.MustRegister(dec, m.duration, m.setup, m.registered, m.evicted, m.leaseSuspended, m.etcdUp, m.notDecided, m.forwarded, &storeCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

var (
	descLoad          = prometheus.NewDesc("shardlimit_shard_load", "Decisions over the last minute.", nil, nil)
	descPartitionLoad = prometheus.NewDesc("shardlimit_shard_partition_load", "Decisions over the last minute, per partition with any.", []string{"partition"}, nil)
	descKeys          = prometheus.NewDesc("shardlimit_shard_keys", "Counter keys held.", nil, nil)
	descMemory        = prometheus.NewDesc("shardlimit_shard_memory_bytes", "Estimated bytes of counter state, every key of every algorithm.", nil, nil)
	descMemoryLimit   = prometheus.NewDesc("shardlimit_shard_memory_limit_bytes", "The bound on shardlimit_shard_memory_bytes: the counters' share, half, of --max-memory, the process's memory bound.", nil, nil)
	descEvictions     = prometheus.NewDesc("shardlimit_shard_evictions_total", "Keys evicted under --max-memory or --max-keys, by reason: idle (not used lately), active (used lately, within its limit), over_limit.", []string{"reason"}, nil)
	descExpirations   = prometheus.NewDesc("shardlimit_shard_expirations_total", "Idle keys dropped once fresh again.", nil, nil)
	descEpisodes      = prometheus.NewDesc("shardlimit_shard_episodes", "Limited-user episodes held in the log.", nil, nil)
	descEpisodesDrop  = prometheus.NewDesc("shardlimit_shard_episodes_dropped_total", "Limited-user episodes dropped to keep the log within --episodes, by reason: closed (the oldest closed first), open (the oldest open, when none was closed).", []string{"reason"}, nil)
	descHotDecisions  = prometheus.NewDesc("shardlimit_shard_hot_keys_decisions", "Decisions the hot-key counts cover (one to two --top-keys-period).", nil, nil)
	descHotSampled    = prometheus.NewDesc("shardlimit_shard_hot_keys_sampled_ratio", "Share of shardlimit_shard_hot_keys_decisions counted by sampling one in --top-keys-sample (past --top-keys-exact a period); 0: the hot-key counts are exact.", nil, nil)
	descHotMaxError   = prometheus.NewDesc("shardlimit_shard_hot_keys_max_error", "The widest ± of the --top-keys hottest keys' counts (bounded-memory error plus sampling error at three standard deviations); 0 when they are exact.", nil, nil)
)

// storeCollector reads the store's counts at scrape time.
type storeCollector struct{ s *Server }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoad, descPartitionLoad, descKeys, descMemory, descMemoryLimit, descEvictions, descExpirations, descEpisodes, descEpisodesDrop, descHotDecisions, descHotSampled, descHotMaxError} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now().UnixNano()
	st := c.s.store.Stats()
	total := c.s.partitionLoad.Other(now)
	for p, n := range c.s.partitionLoad.Snapshot(now) {
		if n > 0 {
			total += n
			ch <- prometheus.MustNewConstMetric(descPartitionLoad, prometheus.GaugeValue, float64(n), strconv.Itoa(p))
		}
	}
	ch <- prometheus.MustNewConstMetric(descLoad, prometheus.GaugeValue, float64(total))
	ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys+st.LogKeys))
	ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(st.EstimatedBytes))
	ch <- prometheus.MustNewConstMetric(descMemoryLimit, prometheus.GaugeValue, float64(st.MaxBytes))
	for i, n := range st.EvictionsBy {
		ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(n), EvictionReasons[i])
	}
	ch <- prometheus.MustNewConstMetric(descExpirations, prometheus.CounterValue, float64(st.Expirations))
	ch <- prometheus.MustNewConstMetric(descEpisodes, prometheus.GaugeValue, float64(c.s.episodes.Len()))
	for i, n := range c.s.episodes.DroppedBy() {
		ch <- prometheus.MustNewConstMetric(descEpisodesDrop, prometheus.CounterValue, float64(n), episodes.DropReasons[i])
	}
	hotTotal, hotSampled := c.s.hot.Volume()
	ch <- prometheus.MustNewConstMetric(descHotDecisions, prometheus.GaugeValue, float64(hotTotal))
	ch <- prometheus.MustNewConstMetric(descHotSampled, prometheus.GaugeValue, float64(hotSampled)/float64(max(hotTotal, 1)))
	var widest uint64
	for _, h := range c.s.hot.Top(0) {
		widest = max(widest, h.Error+h.SamplingError)
	}
	ch <- prometheus.MustNewConstMetric(descHotMaxError, prometheus.GaugeValue, float64(widest))
}
