package router

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/shardlimit/shardlimit/router/overlimit"
	"github.com/shardlimit/shardlimit/router/rules"
)

// result is a rule decision's result, an index into resultNames.
type result int

// Results of a rule decision.
const (
	resultAllowed result = iota
	resultDenied
	resultShadowDenied
	resultFailedOpen
	resultFailedClosed
	resultOverload
	results
)

// resultNames are the values of the result label, by result; no_rule
// counts checks that no rule applies to.
var resultNames = [results]string{"allowed", "denied", "shadow_denied", "failed_open", "failed_closed", "overload"}

const resultNoRule = "no_rule"

// ruleCounters are one rule's decision counters by result, looked up in
// the vector on first use and kept with the rule set.
type ruleCounters [results]atomic.Pointer[prometheus.Counter]

// decided counts one rule decision; rs is the rule set in force, which
// keeps the counters of its rules.
func (m *metrics) decided(rs *ruleSet, c *rules.Resolved, res result) {
	i := c.Rule.Index()
	if i < 0 || i >= len(rs.counters) || &rs.Rules()[i] != c.Rule {
		m.counter(c, res).Inc() // a rule of an older set, still in flight
		return
	}
	slot := &rs.counters[i][res]
	if p := slot.Load(); p != nil {
		(*p).Inc()
		return
	}
	ctr := m.counter(c, res)
	slot.Store(&ctr)
	ctr.Inc()
}

func (m *metrics) counter(c *rules.Resolved, res result) prometheus.Counter {
	return m.decisions.WithLabelValues(c.Service, c.Rule.Endpoint, c.Rule.Name, c.Rule.Algorithm, resultNames[res])
}

type metrics struct {
	duration      prometheus.Histogram
	etcdUp        prometheus.Gauge
	memberChanges prometheus.Counter
	mapVersion    prometheus.Gauge
	mapWritten    atomic.Int64 // Unix ns the map in force was written
	decisions     *prometheus.CounterVec
	shardErrors   *prometheus.CounterVec
	liveness      *prometheus.CounterVec
	circuitOpened *prometheus.CounterVec
	callChecks    prometheus.Histogram
	streamChecks  prometheus.Histogram
	members       prometheus.Gauge
	refunds       prometheus.Counter
	rules         prometheus.Gauge
	invalidRules  prometheus.Gauge
	overBound     prometheus.Gauge
	ruleReloads   prometheus.Counter
	ruleGauges    ruleGauges
	overLimitHits *prometheus.CounterVec
	unreachable   prometheus.Gauge
}

// ruleGauges export each rule's configured limit and period, by service,
// endpoint and rule (the labels of shardlimit_router_decisions_total, to
// join on): one series per rule in force, so at most --max-rules, and a
// rule's series go when the rule does.
type ruleGauges struct {
	limit, period *prometheus.GaugeVec
	mu            sync.Mutex
	shown         map[[3]string]bool // the label values of the series exported
}

// set makes the gauges show rs, the rules in force, and no other rule.
func (g *ruleGauges) set(rs []rules.Rule) {
	g.mu.Lock()
	defer g.mu.Unlock()
	next := make(map[[3]string]bool, len(rs))
	for i := range rs {
		r := &rs[i]
		l := [3]string{r.Service, r.Endpoint, r.Name}
		next[l] = true
		g.limit.WithLabelValues(l[:]...).Set(float64(r.Limit))
		g.period.WithLabelValues(l[:]...).Set(time.Duration(r.Period).Seconds())
	}
	for l := range g.shown {
		if !next[l] {
			g.limit.DeleteLabelValues(l[:]...)
			g.period.DeleteLabelValues(l[:]...)
		}
	}
	g.shown = next
}

// newMetrics registers the router's metrics in reg, reading the
// over-limit cache's size from cache (nil when it is off).
func newMetrics(reg prometheus.Registerer, cache *overlimit.Cache) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_router_decisions_total",
			Help: "Rule decisions, by service, the rule's endpoint, rule, algorithm and result (allowed, denied, shadow_denied, failed_open, failed_closed; overload for checks an overloaded router shed without asking the shard; no_rule for checks no rule applies to).",
		}, []string{"service", "endpoint", "rule", "algorithm", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shardlimit_router_decision_duration_seconds",
			Help:    "Time to answer one Check request, shard calls included.",
			Buckets: []float64{5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1},
		}),
		etcdUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_router_etcd_up", Help: "1 when etcd answered the last health probe.",
		}),
		shardErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_router_shard_errors_total",
			Help: "Calls to a shard that failed (error) or timed out (deadline), and requests' checks for it refused by its open circuit (circuit_open) or given up after waiting past the bound behind its failing calls (queued), and checks the shard answered without deciding them (not_decided: their partition is being taken over from a shard that left without a hand-off), by shard and reason.",
		}, []string{"shard", "reason"}),
		liveness: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_router_liveness_checks_total",
			Help: "Liveness checks of a shard whose call failed (a call with no checks), by shard and result: alive (it answered within --liveness-timeout: its circuit stays closed) or silent (it did not, or refused: its circuit opens at --breaker-failures failed calls in a row).",
		}, []string{"shard", "result"}),
		circuitOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_router_circuit_openings_total",
			Help: "Times a shard's circuit opened, or a failed probe kept it open for another --breaker-cooldown, by shard.",
		}, []string{"shard"}),
		callChecks: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shardlimit_router_shard_call_checks",
			Help:    "Checks per call to a shard: the checks of concurrent requests bound for one shard share one call.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		streamChecks: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shardlimit_router_stream_message_checks",
			Help:    "Checks per CheckStream message from callers: a coalescing client (the Go client's Options.Stream) sends the checks of concurrent calls in one message.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_router_members",
			Help: "Live shards the router routes to.",
		}),
		unreachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shardlimit_router_unreachable_shards",
			Help: "Shards this router reports to etcd as unreachable (circuit open for --unreachable-after while it reaches another shard and etcd); the rebalance leader evicts a reported shard.",
		}),
	}
	m.refunds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shardlimit_router_refunds_total",
		Help: "Rule decisions whose hits were given back because another rule of the same check denied it.",
	})
	m.rules = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shardlimit_router_rules",
		Help: "Valid rules in use.",
	})
	m.invalidRules = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shardlimit_router_rules_invalid",
		Help: "Rules stored in etcd that are not valid and are ignored: each key counts as absent, on every router.",
	})
	m.overBound = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shardlimit_router_rules_over_bound",
		Help: "Valid rules stored in etcd and ignored because their service, or all services, hold more than --max-rules-per-service or --max-rules.",
	})
	m.ruleReloads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shardlimit_router_rule_reloads_total",
		Help: "Rule sets loaded.",
	})
	m.ruleGauges.limit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shardlimit_router_rule_limit",
		Help: "Each rule's configured limit: hits allowed per shardlimit_router_rule_period_seconds (before any soft or elastic allowance), by service, endpoint and rule; gone when the rule is deleted.",
	}, []string{"service", "endpoint", "rule"})
	m.ruleGauges.period = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shardlimit_router_rule_period_seconds",
		Help: "Each rule's configured period in seconds, by service, endpoint and rule; gone when the rule is deleted.",
	}, []string{"service", "endpoint", "rule"})
	m.memberChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shardlimit_router_member_changes_total",
		Help: "Changes of the live shard list seen.",
	})
	m.mapVersion = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shardlimit_router_shardmap_version",
		Help: "Version of the shard map in force; 0 while the ring decides alone.",
	})
	mapAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shardlimit_router_shardmap_age_seconds",
		Help: "Seconds since the shard map in force was written; 0 while there is none.",
	}, func() float64 {
		w := m.mapWritten.Load()
		if w == 0 {
			return 0
		}
		return time.Since(time.Unix(0, w)).Seconds()
	})
	m.overLimitHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_router_overlimit_cache_hits_total",
		Help: "Rule decisions answered by the over-limit cache (denied until the key's retry time, without calling its shard), by service. They are also counted as denied in shardlimit_router_decisions_total.",
	}, []string{"service"})
	overLimitEntries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shardlimit_router_overlimit_cache_entries",
		Help: "Keys the over-limit cache holds a denial for (expired ones are dropped within a second).",
	}, func() float64 { return float64(cache.Len()) })
	overLimitEvictions := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shardlimit_router_overlimit_cache_evictions_total",
		Help: "Denials dropped from the full over-limit cache before their retry time (raise --over-limit-cache when it grows).",
	}, func() float64 { return float64(cache.Evicted()) })
	reg.MustRegister(m.decisions, m.shardErrors, m.liveness, m.circuitOpened, m.callChecks, m.streamChecks, m.members, m.unreachable, m.refunds, m.rules, m.invalidRules, m.overBound, m.ruleReloads,
		m.ruleGauges.limit, m.ruleGauges.period, m.memberChanges, m.mapVersion, mapAge, m.duration, m.etcdUp,
		m.overLimitHits, overLimitEntries, overLimitEvictions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
