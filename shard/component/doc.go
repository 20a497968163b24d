// Package component is what the three servers of shardlimit (the router,
// the shard host and the rebalance job) share in their options: where etcd
// is and how it is reached, the TLS and the grants each serves with, its
// gRPC server's limits, and where its logs, spans and metrics go. Each
// server's Options embeds a Config, so these fields are written, documented,
// defaulted and validated once, and `shardlimit` registers their flags once
// for all three.
//
// The servers call it from their Start: Fill and Validate with their own
// options, Authorizer, Dial and ServerOptions to build the same grants,
// etcd client and gRPC server options. It holds no state and starts
// nothing, and must never import a component (shard, router, rebalance)
// itself.
package component
