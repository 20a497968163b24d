package cluster

import "time"

// RestartPolicy is how Supervise restarts a process that exits, as a
// kubelet restarts a pod's container: after a delay that doubles from
// First up to Max, the count of restarts in a row reset by a run of at
// least Stable; past Tries restarts in a row, it gives up on it.
type RestartPolicy struct {
	First, Max, Stable time.Duration
	Tries              int // 0: never restart
}

// Restarts is the restart policy of `shardlimit dev` with tries restarts
// in a row: 1s, doubling up to 30s; a run of a minute ends a row.
func Restarts(tries int) RestartPolicy {
	return RestartPolicy{First: time.Second, Max: 30 * time.Second, Stable: time.Minute, Tries: tries}
}

// Delay is the wait before the n-th restart in a row (from 1).
func (r RestartPolicy) Delay(n int) time.Duration {
	d := r.First
	for i := 1; i < n && d < r.Max; i++ {
		d *= 2
	}
	return min(d, r.Max)
}

// Supervise says on p.Out when p exits before Stop, and starts it again
// by r, until Stop. It returns when it gives up or Stop is called.
func (p *Proc) Supervise(r RestartPolicy) {
	n := 0 // restarts in a row
	for {
		p.mu.Lock()
		done, started, stopping := p.done, p.started, p.stopping
		p.mu.Unlock()
		select {
		case <-done:
		case <-stopping:
			return
		}
		p.mu.Lock()
		err, stopped := p.err, p.stopped
		p.mu.Unlock()
		how := "exit status 0"
		if err != nil {
			how = err.Error()
		}
		switch {
		case stopped:
			return
		case r.Tries == 0:
			if err != nil {
				p.say("exited: %v", err)
			}
			return
		}
		if time.Since(started) >= r.Stable {
			n = 0
		}
		if n++; n > r.Tries {
			p.say("exited (%s); not restarted: it exited %d times in a row, each within %v of its start (dev --restarts %d)", how, n, r.Stable, r.Tries)
			return
		}
		d := r.Delay(n)
		p.say("exited (%s); dev restarts it in %v (restart %d of %d in a row), as Kubernetes restarts a pod's container", how, d, n, r.Tries)
		select {
		case <-time.After(d):
		case <-stopping:
			return
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		err = p.startLocked()
		p.mu.Unlock()
		if err != nil {
			p.say("not restarted: %v", err)
			return
		}
		p.say("restarted by dev: pid %d", p.Pid())
	}
}
