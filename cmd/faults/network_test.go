package faults

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// cutComment marks the iptables rules the suite adds, so that a rule left
// by a killed run is recognizable (`iptables -S INPUT | grep`).
const cutComment = "shardlimit-faults"

// cutLink drops every packet sent to addr's port on loopback (an iptables
// rule in INPUT on lo), as a network that cut addr off from everyone who
// calls it would: its own connections out (to etcd) go on. The returned
// heal removes the rule; the test's cleanup removes it too, if heal was
// not called. It needs root and iptables, which `make test` installs
// (make net-tools): the scenario is skipped when not run as root (only
// root can add the rule; CI runs as root), and fails without iptables.
func cutLink(t *testing.T, addr string) (heal func(testing.TB)) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("cut %s: %v", addr, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("cutting a link needs root (an iptables rule on loopback): skipped; CI runs as root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("cutting a link needs iptables: `make net-tools` installs the pinned version (make test does)")
	}
	rule := []string{"INPUT", "-i", "lo", "-p", "tcp", "--dport", port, "-m", "comment", "--comment", cutComment, "-j", "DROP"}
	iptables(t, append([]string{"-I"}, rule...)...)
	var once sync.Once
	heal = func(tb testing.TB) { once.Do(func() { iptables(tb, append([]string{"-D"}, rule...)...) }) }
	t.Cleanup(func() { heal(t) })
	return heal
}

// iptables runs iptables with args, waiting for the xtables lock (-w)
// that another run may hold.
func iptables(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
