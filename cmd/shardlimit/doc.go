// Command shardlimit is the one binary of shardlimit: `shardlimit shard`,
// `shardlimit router`, `shardlimit dev` (a whole cluster on this machine
// over an embedded etcd), `shardlimit ctl` (the operator CLI) and
// `shardlimit bench` (the load generator of cmd/bench, with `bench table`,
// which runs the benchmark table against dev clusters, and `bench noop`,
// the baseline's no-op server as a process of its own).
//
// Flags map 1:1 onto each component's Options; the command only parses
// them, starts the component and waits for SIGINT or SIGTERM.
package main
