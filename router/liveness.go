package router

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/connectivity"
)

// errSilent is the verdict on a shard that answered nothing to its
// liveness check within the liveness timeout of the router's own running
// time.
var errSilent = errors.New("the shard answered nothing to a liveness check")

// livenessStep is the timer step by which a liveness check's wait counts
// the router's running time (see runningTime).
const livenessStep = 10 * time.Millisecond

// runningTime counts the time a waiting goroutine of the router ran, from
// the steps of a timer it set livenessStep apart: a step's time counts up
// to twice livenessStep, so a timer that fired late because the router's
// own process waited for a CPU counts as one step, not as the time the
// router was not running. It is how a liveness check tells a shard that
// answered nothing from a router that could not read the answer: on a
// machine where the router itself starves, a wall-clock timeout would
// call a live shard silent. It reads no clock: the caller passes the time.
type runningTime struct {
	last time.Time
	ran  time.Duration
}

// step counts the step that ended at now, and returns the running time.
func (rt *runningTime) step(now time.Time) time.Duration {
	rt.ran += min(max(now.Sub(rt.last), 0), 2*livenessStep)
	rt.last = now
	return rt.ran
}

// checkLiveness sends p the liveness check its breaker asked for, and
// tells the breaker the verdict (see breaker for why): a shard that
// answers within LivenessTimeout of the router's running time (not wall
// time: runningTime) is alive and its circuit stays closed; one that does
// not, or refuses, is dead or stalled, and its circuit opens once
// BreakerFailures calls in a row failed. However starved the router, the
// check ends within BreakerCooldown (or LivenessTimeout when longer).
func (r *Router) checkLiveness(p *peer) {
	ctx, cancel := context.WithTimeout(r.ctx, max(r.opts.BreakerCooldown, r.opts.LivenessTimeout))
	defer cancel()
	answered := make(chan error, 1)
	go func() { answered <- p.calls.Alive(ctx) }()
	err := awaitRunning(answered, r.opts.LivenessTimeout)
	switch {
	case r.ctx.Err() != nil:
		p.breaker.abandonCheck()
	case err == nil:
		r.metrics.liveness.WithLabelValues(p.member.ID, "alive").Inc()
		if p.breaker.alive() {
			p.log.Debug("shard circuit closed: the shard answered a liveness check", "addr", p.member.Addr)
		}
	default:
		r.metrics.liveness.WithLabelValues(p.member.ID, "silent").Inc()
		if p.breaker.silence(time.Now()) {
			r.metrics.circuitOpened.WithLabelValues(p.member.ID).Inc()
			p.log.Debug("shard circuit open: its calls failed and it did not answer a liveness check; calls answered by failure policy until a probe succeeds",
				"addr", p.member.Addr, "failures", r.opts.BreakerFailures, "liveness_timeout", r.opts.LivenessTimeout, "cooldown", r.opts.BreakerCooldown, "err", err)
		}
	}
}

// awaitRunning returns the answer on answered, or errSilent once timeout
// of the router's running time (runningTime) passed without one.
func awaitRunning(answered <-chan error, timeout time.Duration) error {
	rt := runningTime{last: time.Now()}
	t := time.NewTimer(livenessStep)
	defer t.Stop()
	for {
		select {
		case err := <-answered:
			return err
		case <-t.C:
		}
		if rt.step(time.Now()) >= timeout {
			select { // an answer that came with the last step
			case err := <-answered:
				return err
			default:
				return errSilent
			}
		}
		t.Reset(livenessStep)
	}
}

// checkOnReconnect sends p a liveness check each time its connection is
// ready again while its circuit is open, until the connection is closed
// or the router stops. A shard the network cut off, whose connection
// closed (redial.UnackedTimeout) and is dialed again every
// redial.SYNInterval, is decided again as soon as the link heals and the
// check is answered, not a cooldown and a probe later.
func (r *Router) checkOnReconnect(p *peer) {
	for state := p.conn.GetState(); p.conn.WaitForStateChange(r.ctx, state); {
		switch state = p.conn.GetState(); state {
		case connectivity.Shutdown:
			return
		case connectivity.Ready:
			if p.breaker.open() {
				r.checkLiveness(p)
			}
		}
	}
}
