// Package membership keeps the set of live shards in etcd.
//
// A shard registers itself with Register: it writes <prefix>members/<id>
// under a lease, keeps the lease alive, registers again if the lease is lost
// (for example after etcd was unreachable for longer than the TTL), and
// revokes the lease on Close so that routers drop it at once. Routers and the
// rebalance job follow the set with Watch, which calls back with the full,
// sorted list after every change and keeps the last known list while etcd is
// unreachable.
//
// It also holds the connection plumbing every component shares: Dial for
// etcd, DialCreds and ServerCreds for gRPC with or without TLS.
//
// It never decides ownership; that is the shard map's job.
package membership
