package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// restartPolicy is how dev restarts a component process that exits, as
// a kubelet restarts a pod's container: after a delay that doubles from
// first up to max, the count of restarts in a row reset by a run of at
// least stable; past tries restarts in a row, dev gives up on it.
type restartPolicy struct {
	first, max, stable time.Duration
	tries              int // 0: never restart
}

// devRestarts is dev's restart policy with tries restarts in a row.
func devRestarts(tries int) restartPolicy {
	return restartPolicy{first: time.Second, max: 30 * time.Second, stable: time.Minute, tries: tries}
}

// delay is the wait before the n-th restart in a row (from 1).
func (p restartPolicy) delay(n int) time.Duration {
	d := p.first
	for i := 1; i < n && d < p.max; i++ {
		d *= 2
	}
	return min(d, p.max)
}

// child is a component process of the dev cluster, started again by
// supervise when it exits until stop.
type child struct {
	name string
	args []string // the command line, the executable first
	out  io.Writer

	mu       sync.Mutex
	cmd      *exec.Cmd     // the process now
	started  time.Time     // when cmd started
	done     chan struct{} // closed when cmd exited
	err      error         // cmd's exit, once done is closed
	stopped  bool          // stop was called: no restart
	stopping chan struct{} // closed by stop
}

// startChild starts a component, with dev's own --log-format and
// --log-level.
func startChild(out io.Writer, name, exe string, args ...string) (*child, error) {
	c := &child{name: name, out: out, stopping: make(chan struct{}),
		args: append(append([]string{exe}, args...), "--log-format", logFormat, "--log-level", logLevel)}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c, c.startLocked()
}

// startLocked starts the process; c.mu is held.
func (c *child) startLocked() error {
	cmd := exec.Command(c.args[0], c.args[1:]...)
	cmd.Env = childEnv()
	// Own process group: Ctrl-C reaches dev only, which stops the children in
	// order; and they die with dev if dev is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	done := make(chan struct{})
	c.cmd, c.started, c.done, c.err = cmd, time.Now(), done, nil
	go prefixLines(c.out, c.name, pr)
	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(done)
	}()
	return nil
}

// childEnv is the environment of a component: dev's, without the
// SHARDLIMIT_ variables, which set dev's own flags (and would set the
// component's flags of the same name): dev passes each component what
// it needs as flags.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd.Process.Pid
}

// exited reports whether the process now has exited, and how.
func (c *child) exited() (bool, error) {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, c.err
	default:
		return false, nil
	}
}

// supervise says on out when the process exits before stop, and starts
// it again by p.
func (c *child) supervise(p restartPolicy) {
	n := 0 // restarts in a row
	for {
		c.mu.Lock()
		done, started := c.done, c.started
		c.mu.Unlock()
		select {
		case <-done:
		case <-c.stopping:
			return
		}
		c.mu.Lock()
		err, stopped := c.err, c.stopped
		c.mu.Unlock()
		how := "exit status 0"
		if err != nil {
			how = err.Error()
		}
		switch {
		case stopped:
			return
		case p.tries == 0:
			if err != nil {
				say(c.out, c.name, "exited: %v", err)
			}
			return
		}
		if time.Since(started) >= p.stable {
			n = 0
		}
		if n++; n > p.tries {
			say(c.out, c.name, "exited (%s); not restarted: it exited %d times in a row, each within %v of its start (dev --restarts %d)", how, n, p.stable, p.tries)
			return
		}
		d := p.delay(n)
		say(c.out, c.name, "exited (%s); dev restarts it in %v (restart %d of %d in a row), as Kubernetes restarts a pod's container", how, d, n, p.tries)
		select {
		case <-time.After(d):
		case <-c.stopping:
			return
		}
		c.mu.Lock()
		if c.stopped {
			c.mu.Unlock()
			return
		}
		err = c.startLocked()
		c.mu.Unlock()
		if err != nil {
			say(c.out, c.name, "not restarted: %v", err)
			return
		}
		say(c.out, c.name, "restarted by dev: pid %d", c.pid())
	}
}

// stop ends supervision and stops the process with SIGTERM, and SIGKILL
// after grace.
func (c *child) stop(grace time.Duration) {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.stopping)
	}
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		say(c.out, c.name, "did not stop in %v; killing", grace)
		_ = cmd.Process.Kill()
		<-done
	}
}

var outMu sync.Mutex

// say writes one line of dev's about a component, as its own lines are
// written.
func say(out io.Writer, name, format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(out, "%-8s | "+format+"\n", append([]any{name}, args...)...)
}

func prefixLines(out io.Writer, name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		say(out, name, "%s", sc.Text())
	}
}

// stopChildren stops the rebalance job and the router first, then the
// shards one at a time (each drains to those still serving; the last
// has nowhere to hand over), each with SIGTERM and a 10s grace before
// SIGKILL.
func stopChildren(children []*child) {
	for i := len(children) - 1; i >= 0; i-- {
		children[i].stop(10 * time.Second)
	}
}
