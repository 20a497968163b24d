// Package membership keeps the set of live shards in etcd.
//
// A shard registers itself with Register: it writes <prefix>members/<id>
// under a lease, keeps the lease alive, registers again if the lease is lost
// (when etcd was unreachable for longer than the TTL, it first asks etcd,
// once it answers, whether it still holds the lease, as a restarted etcd
// does, and keeps that lease then), and revokes the lease on Close so that
// routers drop it at once. With RegisterUntilLost a lease that is really
// lost (etcd answers, and the lease or the record is gone) ends the
// registration and calls back instead, so that the shard gives its
// counters back and joins again warm before it owns anything (package
// shard). Update rewrites the record, e.g. its state: joining, serving,
// draining. Routers and the
// rebalance job follow the set with Watch, which calls back with the full,
// sorted list after every change and keeps the last known list while etcd is
// unreachable.
//
// The record itself, and its one encoder and decoder, are package member;
// the keys come from etcd.Layout and the watch loop is etcd.Follow.
//
// It never decides ownership (that is the shard map's job) and never
// imports a component package (shard, router, rebalance).
package membership
