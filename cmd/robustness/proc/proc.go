package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
	Log           string // output of every run, appended
	// Command makes the command that runs the program (nil:
	// exec.Command); the robustness suite runs it inside a host.
	Command func(name string, args ...string) *exec.Cmd

	cmd    *exec.Cmd
	done   chan struct{} // closed when the current run exits
	logOff int64         // size of the log when the current run started
}

// Start starts a run of p: bin Sub Args extra. The process has a process
// group of its own, so that no signal meant for the test reaches it, and
// dies with the thread that started it (Pdeathsig), so with the test.
func (p *Proc) Start(bin string, extra ...string) error {
	if p.Running() {
		return fmt.Errorf("%s is already running", p.Name)
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	p.logOff = st.Size()
	args := append(append([]string{p.Sub}, p.Args...), extra...)
	command := p.Command
	if command == nil {
		command = exec.Command
	}
	cmd := command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { _ = cmd.Wait(); close(done) }()
	return nil
}

// Running reports whether the current run has not exited.
func (p *Proc) Running() bool {
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

// Pid is the current run's process id (0 before the first).
func (p *Proc) Pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal sends sig to the current run.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.cmd == nil {
		return fmt.Errorf("%s never started", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: signal %v: %w", p.Name, sig, err)
	}
	return nil
}

// Wait waits up to timeout (a hang guard) for the current run to exit.
func (p *Proc) Wait(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	select {
	case <-p.done:
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
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once it runs
	if err := p.Signal(syscall.SIGKILL); err != nil && p.Running() {
		return err
	}
	return p.Wait(timeout)
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
	b, err := os.ReadFile(p.Log)
	if err != nil || int64(len(b)) < p.logOff || !bytes.Contains(b[p.logOff:], []byte("shardlimit etcd ready in ")) {
		return errors.New("etcd: no ready line yet")
	}
	return nil
}
