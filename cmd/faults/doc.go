// Package faults is shardlimit's fault suite: tests only, no library code.
// It builds the shardlimit binary and runs a cluster of real processes on
// 127.0.0.1 (etcd through `shardlimit etcd`, three shards, two routers and
// a rebalance instance), drives it with a steady load from package
// cmd/bench and with its own probe loop through the Go client
// (router/client, both routers configured, so it fails over), injects
// faults with signals (a shard killed or stopped, etcd killed for a while,
// a router killed or stopped, a user flooding while its shard is down) and
// with the network (every packet to one shard's port dropped by an
// iptables rule on loopback, network_test.go, while the shard keeps its
// etcd lease; it needs root and the pinned iptables that `make test`
// installs),
// after a scenario without a fault that shows the floor, and asserts on
// what callers saw: errors, answers by failure policy and whose keys they
// were for, latency, and how long membership took to converge and the
// cluster to recover.
//
// `go test ./cmd/faults` (part of `make test`) runs the short form: short
// faults, routers with a 5 s deadline and a 10 s queue wait, a 10 s lease
// and a 30 s client timeout, so that a loaded machine (load 20-40) neither answers a healthy
// shard's users by policy nor loses a lease, and no assertion on a time,
// only on what callers saw; right after a dead shard's partitions move,
// their new owners take them over before deciding (answers by policy
// meanwhile), and the short form asserts only that a user once decided
// again stays decided. `make faults` runs the full form (-faults.full): the
// issue's durations and the routers' default 20 ms deadline, with latency
// and recovery times asserted; it wants a quiet machine, and the "no
// fault" scenario shows whether it had one. -faults.deadline sets the
// routers' deadline, -faults.slack the latency allowed over it, and
// -faults.bin runs a given binary instead of building cmd/shardlimit. Both
// forms print a table of every scenario at the end (go test -v shows it).
//
// The cluster is started by the one launcher that dev and the bench table
// use too (cmd/internal/cluster), with etcd as a process the suite can
// kill; a process is started again by one function (cluster.launch), on
// the command line the launcher gave it. It runs secure as in production:
// the flags and client options that say how processes and clients
// authenticate come from one place (the launcher's Security),
// with a local PKI like dev's and a grants file. Nothing outside this
// package imports it.
package faults
