package netns

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/poll"
)

// helperEnv makes the test binary a helper inside a host: "listen:ADDR"
// echoes lines on ADDR; "dial:ADDR" sends a line to ADDR and exits 0 if it
// came back within a second, 1 otherwise.
const helperEnv = "NETNS_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

func helper(spec string) int {
	mode, addr, _ := strings.Cut(spec, ":")
	switch mode {
	case "listen":
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := lis.Accept()
			if err != nil {
				return 1
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	case "dial":
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := fmt.Fprintln(c, "ping"); err != nil {
			return 1
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "ping\n" {
			fmt.Fprintln(os.Stderr, line, err)
			return 1
		}
		return 0
	}
	return 2
}

// inHost runs the test binary as a helper inside h.
func inHost(h *Host, spec string) *exec.Cmd {
	cmd := h.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	return cmd
}

// listen runs an echo listener on h's address and port, and returns once
// it listens; it is killed when the test ends.
func listen(t *testing.T, h *Host, port int) *exec.Cmd {
	t.Helper()
	srv := inHost(h, fmt.Sprintf("listen:%s:%d", h.IP, port))
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("listener in %s: %q, %v", h.Name, line, err)
	}
	return srv
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: skipped; CI runs as root")
	}
}

// Two hosts reach each other; a cut one way stops a connection from
// either side, a heal restores it, and Close leaves no namespace behind.
func TestCutAndHeal(t *testing.T) {
	needRoot(t)
	n, err := New("a", "b")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = n.Close()
		}
	})
	a, b := n.Host("a"), n.Host("b")
	srv := listen(t, b, 7000)
	dial := func() error {
		if out, err := inHost(a, "dial:"+b.IP+":7000").CombinedOutput(); err != nil {
			return fmt.Errorf("a → b: %v: %s", err, out)
		}
		return nil
	}
	poll.Until(t, 30*time.Second, dial) // before any cut
	// b's replies to a are dropped: a's connection cannot complete.
	if err := n.Cut(b, a); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err == nil {
		t.Fatal("a reached b with b's packets to a dropped")
	}
	if err := n.HealAll(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, dial)
	if err := n.Cut(a, b); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err == nil {
		t.Fatal("a reached b with a's packets to b dropped")
	}
	if err := n.Heal(a, b); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, dial)

	_ = srv.Process.Kill()
	_ = srv.Wait()
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range append(n.Hosts(), &Host{NS: n.sw}) {
		for _, l := range strings.Split(string(list), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == h.NS {
				t.Errorf("namespace %s left after Close", h.NS)
			}
		}
	}
}

// Bad names are refused, naming the bound, and leave nothing behind.
func TestNewRefusesBadNames(t *testing.T) {
	needRoot(t)
	for _, names := range [][]string{nil, {"toolonghost"}, {"a b"}} {
		if n, err := New(names...); err == nil {
			_ = n.Close()
			t.Errorf("New(%q): no error", names)
		}
	}
}

// The test process, attached, reaches a host's listener directly; a
// Host.Command's pid is the program's own (a signal reaches it); Close
// removes the local interface.
func TestAttachLocal(t *testing.T) {
	needRoot(t)
	n, err := New("a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if err := n.AttachLocal(); err != nil {
		t.Fatal(err)
	}
	a := n.Host("a")
	srv := listen(t, a, 7000)
	poll.Until(t, 30*time.Second, func() error {
		c, err := net.DialTimeout("tcp", a.IP+":7000", time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", srv.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if self, _ := os.Executable(); exe != self {
		t.Errorf("pid %d runs %s, not the program %s", srv.Process.Pid, exe, self)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := exec.Command("ip", "-o", "addr").Output(); strings.Contains(string(b), n.LocalIP()+"/") {
		t.Errorf("%s left in the machine's namespace after Close", n.LocalIP())
	}
}
