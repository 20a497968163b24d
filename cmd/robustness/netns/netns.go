package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
)

// Net is a set of hosts on one bridge.
type Net struct {
	prefix string // of every namespace and interface name
	subnet int    // the third octet of 10.77.subnet.0/24
	sw     string // the switch's namespace
	hosts  []*Host
	local  string // the interface AttachLocal made in the caller's namespace, if any

	mu   sync.Mutex
	cuts map[[2]string]bool // from, to host names
}

// Host is one network namespace on the Net's bridge.
type Host struct {
	Name string // as given to New
	NS   string // the namespace's name (ip netns exec NS ...)
	IP   string // its address on the bridge
	net  *Net
}

// seq makes each Net's names and subnet unique within the process; the
// process id makes them unique on the machine.
var seq atomic.Int32

// New makes a Net of hosts with the names given (each at most 8
// characters), 10.77.N.1, .2, ... in that order. On an error it removes
// what it made.
func New(names ...string) (*Net, error) {
	if len(names) == 0 || len(names) > 250 {
		return nil, fmt.Errorf("netns: hosts: %d, want 1..250", len(names))
	}
	n := seq.Add(1)
	net := &Net{
		prefix: fmt.Sprintf("sl%d%c", os.Getpid()%100000, 'a'+rune(n%26)),
		subnet: freeSubnet(os.Getpid() + int(n)),
		cuts:   map[[2]string]bool{},
	}
	net.sw = net.prefix + "sw"
	steps := [][]string{
		{"netns", "add", net.sw},
		{"-n", net.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", net.sw, "link", "set", "br0", "up"},
	}
	for i, name := range names {
		if len(name) == 0 || len(name) > 8 || strings.ContainsAny(name, " /") {
			net.Close()
			return nil, fmt.Errorf("netns: host name %q: want 1..8 characters, no space or slash", name)
		}
		h := &Host{Name: name, NS: net.prefix + name, IP: fmt.Sprintf("10.77.%d.%d", net.subnet, i+1), net: net}
		net.hosts = append(net.hosts, h)
		in, out := fmt.Sprintf("%sh%d", net.prefix, i), fmt.Sprintf("%sp%d", net.prefix, i)
		steps = append(steps,
			[]string{"netns", "add", h.NS},
			// Made inside the host's namespace, its peer in the switch's:
			// no interface passes through the machine's own.
			[]string{"-n", h.NS, "link", "add", in, "type", "veth", "peer", "name", out, "netns", net.sw},
			[]string{"-n", h.NS, "addr", "add", h.IP + "/24", "dev", in},
			[]string{"-n", h.NS, "link", "set", in, "up"},
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			[]string{"-n", net.sw, "link", "set", out, "master", "br0"},
			[]string{"-n", net.sw, "link", "set", out, "up"},
		)
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			net.Close()
			return nil, err
		}
	}
	return net, nil
}

// LocalIP is the address AttachLocal gives the caller's own namespace.
func (n *Net) LocalIP() string { return fmt.Sprintf("10.77.%d.254", n.subnet) }

// AttachLocal puts the calling process's own network namespace on the
// bridge, as LocalIP, so that a test can talk to every host directly
// (its workload and its probes) without running in a namespace itself: a
// process's namespace is per thread, and Go's runtime moves goroutines
// between threads. It is the one interface the Net makes outside its
// namespaces; Close removes it. Links to and from the caller cannot be
// cut (a cut is a rule in the receiver's namespace, and the caller's is
// the machine's own): the caller stands for clients that always reach
// the cluster's front door.
func (n *Net) AttachLocal() error {
	in, out := n.prefix+"l0", n.prefix+"l1"
	steps := [][]string{
		{"link", "add", in, "type", "veth", "peer", "name", out, "netns", n.sw},
		{"addr", "add", n.LocalIP() + "/24", "dev", in},
		{"link", "set", in, "up"},
		{"-n", n.sw, "link", "set", out, "master", "br0"},
		{"-n", n.sw, "link", "set", out, "up"},
	}
	n.local = in
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// freeSubnet returns the first N from from (mod 250, 1..250) whose
// 10.77.N.254 no Net of another process has attached to the caller's
// namespace: two test binaries that run at once (go test ./... runs
// packages in parallel) must not both route 10.77.N.0/24 there.
func freeSubnet(from int) int {
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for i := range 250 {
		n := (from+i)%250 + 1
		if !strings.Contains(string(out), fmt.Sprintf(" 10.77.%d.254/", n)) {
			return n
		}
	}
	return from%250 + 1
}

// Hosts returns the hosts, in the order New was given their names.
func (n *Net) Hosts() []*Host { return n.hosts }

// Host returns the host of that name, or nil.
func (n *Net) Host(name string) *Host {
	for _, h := range n.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Command returns a command that runs name with args inside h.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Cut drops every packet from from to to (one way): to's own packets to
// from still go, so a connection from either side fails, but a packet of
// to's reaches from. Cut twice, the other way round, for both ways.
func (n *Net) Cut(from, to *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cuts[[2]string{from.Name, to.Name}] {
		return nil
	}
	if err := run("ip", "netns", "exec", to.NS, "iptables", "-w", "-A", "INPUT", "-s", from.IP, "-j", "DROP"); err != nil {
		return err
	}
	n.cuts[[2]string{from.Name, to.Name}] = true
	return nil
}

// Heal takes away the cut from from to to, if any.
func (n *Net) Heal(from, to *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.heal([2]string{from.Name, to.Name})
}

// HealAll takes away every cut.
func (n *Net) HealAll() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for c := range n.cuts {
		errs = append(errs, n.heal(c))
	}
	return errors.Join(errs...)
}

// heal removes cut c's rule. The caller holds mu.
func (n *Net) heal(c [2]string) error {
	if !n.cuts[c] {
		return nil
	}
	if err := run("ip", "netns", "exec", n.Host(c[1]).NS, "iptables", "-w", "-D", "INPUT", "-s", n.Host(c[0]).IP, "-j", "DROP"); err != nil {
		return err
	}
	delete(n.cuts, c)
	return nil
}

// Close removes every namespace of the Net, and with them their
// interfaces and rules. It reports the first failure, after trying all.
func (n *Net) Close() error {
	var errs []error
	if n.local != "" {
		// Removing the switch would take the pair with it; removed
		// first, no address of the Net is left in the caller's
		// namespace even if what follows fails.
		errs = append(errs, runQuiet("ip", "link", "del", n.local))
	}
	for _, h := range n.hosts {
		errs = append(errs, runQuiet("ip", "netns", "del", h.NS))
	}
	errs = append(errs, runQuiet("ip", "netns", "del", n.sw))
	return errors.Join(errs...)
}

// runQuiet is run, taking a namespace already gone as done.
func runQuiet(name string, args ...string) error {
	err := run(name, args...)
	if err != nil && (strings.Contains(err.Error(), "No such file or directory") || strings.Contains(err.Error(), "Cannot find device")) {
		return nil
	}
	return err
}

// run runs a command, its output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
