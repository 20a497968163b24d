// Package clustertest runs a shardlimit cluster inside a test: N shards, M
// routers and rebalance instances over a real etcd (package
// shard/etcd/embedded, one per test package) and real gRPC on 127.0.0.1,
// each cluster under a key prefix of its own, built by the same
// constructors production uses (shard.Start, router.Start,
// rebalance.Start) and closed by t.Cleanup.
//
// Clusters run secure, as production does: each has a CA of its own
// (shard/creds.Local, the code `shardlimit dev` uses), every hop is mTLS,
// and the router's and rebalance job's certificates are granted the
// internal role and an operator certificate the operator role. Tests call
// as any identity (As, Operator, Internal, WithToken) and store grants and
// tokens in etcd (Grant, Token). Options.Insecure is for the tests of
// --insecure only.
//
// Its timings hold on a loaded machine (make test runs at load 20-40 on
// 2 cores): shards' leases last 10 s and the rebalance session 10 s, so
// neither is lost to a stall, and routers wait 5 s for a shard, so a
// healthy one is never answered for by policy. A test that needs a shard
// gone kills it and revokes its lease (RevokeLease) where it wants the
// record to disappear; tests of deadlines and elections set their own.
//
// Testable examples, which get no testing.TB, start a cluster with the one
// ExampleTB returns.
//
// It lives beside the router because the router's tests are its main
// users; it is the only package under router/ that imports the shard host
// and the rebalance job, and only tests may import it.
package clustertest
