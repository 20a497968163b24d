// Package cluster is shardlimit's one cluster launcher: Start runs etcd,
// N shards, M routers and the rebalance job as processes of the
// shardlimit binary and returns a Cluster, the values a caller needs
// (each process's addresses, pid and log, etcd's address and a client of
// it, the credentials): nothing parses what a command prints for people,
// except etcd's ready line, which is how `shardlimit etcd` says it
// serves.
//
// Its callers: `shardlimit dev` prints from the Cluster (etcd inside dev,
// secure, the processes' output after their names, restarted as a
// kubelet restarts a container: Supervise); `shardlimit bench table`
// (cmd/bench) loads the clusters it starts; the fault suite (cmd/faults)
// runs one with etcd as a process it can kill. The robustness suite
// (cmd/robustness) runs each process in a network namespace of its own
// and so builds its cluster from the parts: Proc (one process, started
// again on the same command line, its output appended to one log;
// Command runs it inside a host), Security (the one local PKI and grants
// file, and the flags that say how a component authenticates, or, for
// Options.PlainText, that it does not: --insecure), Kit (the
// binary built once per test binary), Fetch and Metric (a component's
// ops server), and Summary (a suite's lines for its TestMain).
//
// It lives under cmd/internal because only the commands and suites under
// cmd/ use it, and it links no test code, so that the shardlimit binary
// can. A process it starts has a process group of its own and dies with
// the thread that started it (Pdeathsig), so with the caller. It never
// imports a component's host package (router, shard, rebalance): it runs
// their binary.
package cluster
