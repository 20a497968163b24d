package client

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// metrics are the client's Prometheus metrics, registered on
// Options.Registerer; the zero value (no Registerer) records nothing.
//
//	shardlimit_client_decisions_total{result}          allowed, denied, failure_mode
//	shardlimit_client_failure_mode_answers_total{reason} deadline, unavailable, error
//	shardlimit_client_check_duration_seconds            histogram, per Check/CheckOne/CheckBatch call
//	shardlimit_client_retries_total{reason}             not_sent, connection_lost
//
// Labels are bounded: no service, user or router address.
type metrics struct {
	decisions *prometheus.CounterVec
	failures  *prometheus.CounterVec
	duration  prometheus.Histogram
	retries   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	if reg == nil {
		return m, nil
	}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_client_decisions_total",
		Help: "Decisions the client returned, by result: allowed, denied (by a router), failure_mode (no router answered in time; the client's failure mode answered).",
	}, []string{"result"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_client_failure_mode_answers_total",
		Help: "Calls answered by the client's failure mode, by why no router answered: deadline, unavailable, error.",
	}, []string{"reason"})
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "shardlimit_client_check_duration_seconds",
		Help:    "Time of a Check, CheckOne or CheckBatch call, retries and batching included.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_client_retries_total",
		Help: "Attempts sent again to the next router, by why: not_sent (the request never left), connection_lost (its connection broke before any answer; retried once).",
	}, []string{"reason"})
	for _, c := range []prometheus.Collector{m.decisions, m.failures, m.duration, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every series exists from the start, so rates and alerts see zeros.
	for _, r := range []string{"allowed", "denied", "failure_mode"} {
		m.decisions.WithLabelValues(r)
	}
	for _, r := range []string{"deadline", "unavailable", "error"} {
		m.failures.WithLabelValues(r)
	}
	for _, r := range []string{retryNotSent, retryLost} {
		m.retries.WithLabelValues(r)
	}
	return m, nil
}

// observe records a call that started at start and returned ds, unless
// it failed.
func (m *metrics) observe(start time.Time, ds []Decision, err error) {
	if m.duration == nil {
		return
	}
	m.duration.Observe(time.Since(start).Seconds())
	if err == nil {
		for i := range ds {
			m.decided(&ds[i])
		}
	}
}

func (m *metrics) decided(d *Decision) {
	switch {
	case d.FromFailureMode:
		m.decisions.WithLabelValues("failure_mode").Inc()
	case d.Allowed:
		m.decisions.WithLabelValues("allowed").Inc()
	default:
		m.decisions.WithLabelValues("denied").Inc()
	}
}

// failure records a call answered by the failure mode because of err.
func (m *metrics) failure(err error) {
	if m.failures == nil {
		return
	}
	reason := "error"
	switch {
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		reason = "deadline"
	case status.Code(err) == codes.Unavailable:
		reason = "unavailable"
	}
	m.failures.WithLabelValues(reason).Inc()
}

func (m *metrics) retry(why string) {
	if m.retries != nil {
		m.retries.WithLabelValues(why).Inc()
	}
}
