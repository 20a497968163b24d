// Package proc runs the processes of a test cluster of the shardlimit
// binary and asks them how they are: a Proc is one component (etcd, a
// shard, a router, the rebalance job) that can be started, signalled,
// killed and started again on the same command line, its output appended
// to one log file; Security is the one local PKI every component and the
// test's own clients authenticate with; Kit builds the binary once;
// Fetch and Metric read a component's ops server; Summary gathers a
// suite's lines for its TestMain to print.
//
// The fault suite (cmd/faults, on 127.0.0.1) and the robustness suite
// (cmd/robustness, each process in a network namespace of its own) both
// launch through it, so that a process dies with the test that started it
// (Pdeathsig) in both, and the security flags are written once. It
// starts and signals processes and reads their ops servers; it never
// parses what a component prints for people, except etcd's ready line,
// which is how etcd says it serves.
package proc
