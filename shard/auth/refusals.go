package auth

import (
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/logwindow"
)

// refusals counts every refused call by API and reason, and logs them at
// most once per reason per LogEvery, counting the lines it left out.
type refusals struct {
	total *prometheus.CounterVec
	// The other metrics of authentication: whether the server runs
	// without it, and the grants in force.
	insecure, grants, invalid, synced prometheus.Gauge
	log                               *slog.Logger
	every                             time.Duration
	now                               func() time.Time

	lines logwindow.Repeats // one line per reason per every
}

// reasonAuthTimeout is the log reason of a connection closed for not
// authenticating within --auth-timeout (rpc.RefusedAuthTimeout).
const reasonAuthTimeout = "auth_timeout"

func newRefusals(o Options) (*refusals, error) {
	r := &refusals{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardlimit", Subsystem: o.Component, Name: "auth_refusals_total",
			Help: "Calls refused by authentication or authorization, by gRPC service (api) and reason: no_credentials, unknown_credentials, role, service, method.",
		}, []string{"api", "reason"}),
		insecure: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "shardlimit", Subsystem: o.Component, Name: "insecure",
			Help: "1 when the server runs without TLS and authentication (--insecure), else 0.",
		}),
		grants: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "shardlimit", Subsystem: o.Component, Name: "grants",
			Help: "Identities granted a role, from the grants file and etcd.",
		}),
		invalid: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "shardlimit", Subsystem: o.Component, Name: "grants_invalid",
			Help: "Grants stored in etcd that are not valid: their identities are refused until fixed.",
		}),
		synced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "shardlimit", Subsystem: o.Component, Name: "grants_last_sync_timestamp_seconds",
			Help: "When the grants in force were last known to match etcd (Unix seconds): set by every list and watch event of grants and every successful check against etcd (every few seconds); 0 before the first. A cut-off component keeps its last grants: alert on time() minus this.",
		}),
		log: o.Logger, every: o.LogEvery, now: time.Now, lines: logwindow.Repeats{Window: o.LogEvery},
	}
	if o.Registry != nil {
		for _, c := range []prometheus.Collector{r.total, r.insecure, r.grants, r.invalid, r.synced} {
			if err := o.Registry.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// record counts one refusal and logs it unless a line of the same reason
// was written within the last LogEvery.
func (r *refusals) record(c *Caller, reason string) {
	r.total.WithLabelValues(c.api, reason).Inc()
	suppressed, ok := r.window(reason)
	if !ok {
		return
	}
	method := c.method
	if !c.known {
		method = "unknown"
	}
	peer := ""
	if c.peer != nil {
		peer = c.peer.String()
	}
	// The caller's id is a certificate name or a grant's name, never a
	// token; an unknown caller is logged by its address only.
	r.log.Warn("call refused", "reason", reason, "api", c.api, "method", method, "caller", c.Name(), "peer", peer,
		"suppressed", suppressed, "suppressed_window", r.every)
}

// connTimedOut logs a connection closed for not authenticating in time
// (package rpc counts it), unless a line of the same kind was written
// within the last LogEvery.
func (r *refusals) connTimedOut(peer net.Addr) {
	suppressed, ok := r.window(reasonAuthTimeout)
	if !ok {
		return
	}
	addr := ""
	if peer != nil {
		addr = peer.String()
	}
	r.log.Warn("connection closed: not authenticated in time", "reason", reasonAuthTimeout, "peer", addr,
		"suppressed", suppressed, "suppressed_window", r.every)
}

// window reports whether a line of reason may be written now, at most one
// per LogEvery, and how many it held back since the last one.
func (r *refusals) window(reason string) (suppressed int, ok bool) {
	ok, suppressed = r.lines.Note(reason, r.now())
	return suppressed, ok
}
