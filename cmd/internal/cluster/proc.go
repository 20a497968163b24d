package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one process of a cluster. Starting it again runs the same
// command line: same addresses, same data.
type Proc struct {
	Name string
	Sub  string   // the subcommand: etcd, shard, router, rebalance
	Args []string // its flags, without those Start adds
	// Addr is the gRPC address (etcd: the client address); Metrics the
	// host:port of /metrics, /healthz and /readyz ("" for etcd).
	Addr, Metrics string
	// Log is the file that gets the output of every run, appended; with
	// Out set, Out gets it instead, each line after the process's name
	// (Say's form).
	Log string
	Out io.Writer
	// Command makes the command that runs the program (nil:
	// exec.Command); the robustness suite runs it inside a host.
	Command func(name string, args ...string) *exec.Cmd
	// DeathSignal is what the process gets when the thread that started
	// it exits (Pdeathsig; 0: SIGKILL).
	DeathSignal syscall.Signal

	mu       sync.Mutex
	bin      string
	extra    []string      // the flags Start added
	cmd      *exec.Cmd     // the current run
	started  time.Time     // when it started
	done     chan struct{} // closed when it exited
	err      error         // its exit, once done is closed
	logOff   int64         // size of the log when it started
	stopped  bool          // Stop was called: Supervise restarts it no more
	stopping chan struct{} // closed by Stop
}

// Start starts a run of p: bin Sub Args extra. The process has a process
// group of its own, so that no signal meant for the caller reaches it,
// and dies with the thread that started it (DeathSignal). Its environment
// is the caller's without the SHARDLIMIT_ variables, which would set its
// flags: everything it needs is on its command line.
func (p *Proc) Start(bin string, extra ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bin, p.extra = bin, extra
	return p.startLocked()
}

// Restart starts a run of p on the command line of its last Start.
func (p *Proc) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

// startLocked starts a run; p.mu is held.
func (p *Proc) startLocked() error {
	if p.runningLocked() {
		return fmt.Errorf("%s is already running", p.Name)
	}
	var out io.Writer
	var closeOut func()
	if p.Out != nil {
		pr, pw := io.Pipe()
		go prefixLines(p.Out, p.Name, pr)
		out, closeOut = pw, func() { _ = pw.Close() }
	} else {
		f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		p.logOff, out, closeOut = st.Size(), f, func() {}
	}
	command := p.Command
	if command == nil {
		command = exec.Command
	}
	cmd := command(p.bin, append(append([]string{p.Sub}, p.Args...), p.extra...)...)
	if cmd.Env == nil {
		cmd.Env = componentEnv()
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: cmp.Or(p.DeathSignal, syscall.SIGKILL)}
	if err := cmd.Start(); err != nil {
		closeOut()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.started, p.done, p.err = cmd, time.Now(), done, nil
	if p.stopping == nil {
		p.stopping = make(chan struct{})
	}
	go func() {
		err := cmd.Wait()
		closeOut()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// componentEnv is the environment of a component: the caller's, without
// the SHARDLIMIT_ variables, which set flags of the same name.
func componentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARDLIMIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// Running reports whether the current run has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Proc) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited reports whether the current run has exited, and how.
func (p *Proc) Exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || p.runningLocked() {
		return false, nil
	}
	return true, p.err
}

// Pid is the current run's process id (0 before the first).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// current returns the current run and its done channel.
func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Signal sends sig to the current run.
func (p *Proc) Signal(sig syscall.Signal) error {
	cmd, _ := p.current()
	if cmd == nil {
		return fmt.Errorf("%s never started", p.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: signal %v: %w", p.Name, sig, err)
	}
	return nil
}

// Wait waits up to timeout (a hang guard) for the current run to exit.
func (p *Proc) Wait(timeout time.Duration) error {
	_, done := p.current()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %v", p.Name, timeout)
	}
}

// Kill kills the current run with SIGKILL, if it runs, and waits up to
// timeout for it to exit.
func (p *Proc) Kill(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(syscall.SIGCONT) // a stopped process dies only once it runs
	if err := p.Signal(syscall.SIGKILL); err != nil && p.Running() {
		return err
	}
	return p.Wait(timeout)
}

// Stop ends Supervise's restarts and stops the current run with SIGTERM,
// and SIGKILL after grace (at once with none).
func (p *Proc) Stop(grace time.Duration) {
	p.mu.Lock()
	if !p.stopped && p.stopping != nil {
		close(p.stopping)
	}
	p.stopped = true
	p.mu.Unlock()
	if grace <= 0 || !p.Running() {
		_ = p.Kill(30 * time.Second)
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	if p.Wait(grace) != nil {
		p.say("did not stop in %v; killing", grace)
		_ = p.Kill(30 * time.Second)
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// EtcdReady reports whether etcd's current run has printed its ready
// line, which is how `shardlimit etcd` says it serves.
func (p *Proc) EtcdReady() error {
	p.mu.Lock()
	off := p.logOff
	p.mu.Unlock()
	b, err := os.ReadFile(p.Log)
	if err != nil || int64(len(b)) < off || !bytes.Contains(b[off:], []byte("shardlimit etcd ready in ")) {
		return errors.New("etcd: no ready line yet")
	}
	return nil
}

// outMu keeps the lines of processes that share an Out whole.
var outMu sync.Mutex

// Say writes one line about the process called name to out, in the form
// its own lines take there: the name, a bar, the text.
func Say(out io.Writer, name, format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(out, "%-8s | "+format+"\n", append([]any{name}, args...)...)
}

// say writes a line about p to its Out; without one, nothing.
func (p *Proc) say(format string, args ...any) {
	if p.Out != nil {
		Say(p.Out, p.Name, format, args...)
	}
}

func prefixLines(out io.Writer, name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		Say(out, name, "%s", sc.Text())
	}
	_, _ = io.Copy(io.Discard, r) // a line past the buffer: keep the process writing
}
