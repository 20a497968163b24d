// Package cluster runs shardlimit in one process: an embedded etcd, shard
// hosts and routers on 127.0.0.1 with real gRPC. `shardlimit dev` uses its
// embedded etcd; tests use New to ask for N shards and M routers, each
// cluster under its own etcd key prefix, closed by t.Cleanup.
//
// It is for development and tests only; production runs each component as
// its own process against a real etcd cluster.
package cluster
