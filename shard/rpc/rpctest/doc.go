// Package rpctest helps tests call gRPC servers with requests that a
// generated client would refuse to encode (invalid UTF-8 in a string, bytes
// that are no message), to check what a server answers them, and gives
// them a local PKI's TLS for a server and its clients (NewLocalTLS) and
// an Authorizer that knows its operator and one service's token
// (NewAuthorizer), serves a test's fake peers (Serve), and names an
// address that nobody listens on (DeadAddr).
//
// Tests of the shard/rpc package, of every server (router, Envoy's rate
// limit service) and of the components that dial shards or routers
// (hand-offs, the rebalance job, the lease guard, the Go client) import
// it; nothing outside tests may.
package rpctest
