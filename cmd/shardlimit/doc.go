// Command shardlimit is the one binary of shardlimit. Its subcommands:
//   - `shard`, `router`, `rebalance`: the three components;
//   - `dev`: a whole cluster on this machine over an embedded etcd, each
//     component a process of its own, started by the cluster launcher
//     (cmd/internal/cluster), secure with the CA, certificates, grants
//     file, demo token and client config file it makes, and the router's
//     HTTP/JSON API on, with a curl line to try it; it picks free ports for
//     listen flags with port 0, and restarts a component process that
//     exits, with backoff;
//     Its etcd serves TLS with client certificates of a CA of its own and
//     etcd's authentication on, a role per component, on loopback only
//     unless --etcd-listen-any;
//   - `etcd`: a single-member etcd server (dev's embedded one, plain text,
//     loopback only unless --listen-any) as a process of its own, which can
//     be killed and restarted on the same data (the fault suite, cmd/faults,
//     does); `etcd auth` turns a production etcd's authentication on with a
//     role per component (etcd_auth.go; the Kubernetes Job runs it);
//   - `ctl`: the operator CLI (check, rules, members, limited, top,
//     rebalance, shardmap, grants, reset), which finds its router and
//     credentials in flags, SHARDLIMIT_ variables or the client config
//     file of SHARDLIMIT_CONFIG;
//   - `bench`: the load generator of package cmd/bench, with `bench table`,
//     which runs the benchmark table against dev's clusters, and `bench noop`,
//     the baseline's no-op server as a process of its own;
//   - `version` (also `--version`): the module version, commit and Go
//     version.
//
// Every command group (the top level, ctl, ctl rules, ...) refuses a word
// that is not one of its commands as a usage error (exit 2) naming the
// closest command (subcommands.go).
//
// Flags map 1:1 onto each component's Options. What the three servers
// share (etcd, TLS files, --insecure and the grants file, the gRPC
// limits, tracing, --metrics-listen and --pprof) is registered once, by
// serverFlags onto the component.Config their Options embed, and one
// runServer starts a server, serves its /metrics, /healthz and /readyz,
// waits for SIGINT or SIGTERM and stops it (server.go). Every flag of
// shard, router, rebalance and dev is read from its SHARDLIMIT_ variable
// too, the command line winning (env.go). Components refuse to start
// without --tls-cert, --tls-key and --tls-ca unless --insecure (tls.go).
// It links no test code.
package main
