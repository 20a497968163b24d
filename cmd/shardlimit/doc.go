// Command shardlimit is the one binary of shardlimit. Its subcommands:
//   - `shard`, `router`, `rebalance`: the three components;
//   - `dev`: a whole cluster on this machine over an embedded etcd, each
//     component a process of its own;
//   - `etcd`: a single-member etcd server (dev's embedded one) as a process
//     of its own, which can be killed and restarted on the same data (the
//     fault suite, cmd/faults, does);
//   - `ctl`: the operator CLI (check, rules, members, limited, top,
//     rebalance, shardmap);
//   - `bench`: the load generator of package cmd/bench, with `bench table`,
//     which runs the benchmark table against dev clusters, and `bench noop`,
//     the baseline's no-op server as a process of its own;
//   - `version` (also `--version`): the module version, commit and Go
//     version.
//
// Flags map 1:1 onto each component's Options; the command only parses
// them, starts the component and waits for SIGINT or SIGTERM. It links no
// test code.
package main
