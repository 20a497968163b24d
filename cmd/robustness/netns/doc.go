// Package netns makes hosts that a test can cut apart: each Host is a
// Linux network namespace with one interface on a bridge that lives in a
// namespace of its own (the switch), so nothing changes in the machine's
// own network, and every address is one the Net made (10.77.N.0/24).
// AttachLocal is the one exception, asked for: it puts the caller's own
// namespace on the bridge too, so that a test process reaches every host
// without entering a namespace (which Go can do only per thread).
// Cut drops the packets from one host to another (an iptables rule in the
// receiving host's namespace): one way, or both with two calls, while
// every other link keeps working; Heal and HealAll take the rules away.
// Host.Command runs a program inside a host, as that program's own
// process (ip netns exec execs it): a signal to the command's pid reaches
// the program. Close removes every
// namespace and interface the Net made.
//
// It is the robustness suite's (issue 24) way to cut any link between any
// two components. It needs root, iproute2 and iptables, which `make test`
// installs pinned (make net-tools); a test that needs them and lacks
// root skips, as the fault suite's network cuts do.
package netns
