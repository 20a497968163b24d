// Package clustertest runs a shardlimit cluster inside a test: N shards, M
// routers and rebalance instances over a real etcd (package
// shard/etcd/embedded, one per test package) and real gRPC on 127.0.0.1,
// each cluster under a key prefix of its own, built by the same
// constructors production uses (shard.Start, router.Start,
// rebalance.Start) and closed by t.Cleanup.
//
// It lives beside the router because the router's tests are its main
// users; it is the only package under router/ that imports the shard host
// and the rebalance job, and only tests may import it.
package clustertest
