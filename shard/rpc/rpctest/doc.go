// Package rpctest helps tests call gRPC servers with requests that a
// generated client would refuse to encode (invalid UTF-8 in a string, bytes
// that are no message), to check what a server answers them, and gives
// them a local PKI's TLS for a server and its clients (NewLocalTLS) and
// an Authorizer that knows its operator and one service's token
// (NewAuthorizer), and serves a test's fake peers (Serve).
//
// Tests of the shard/rpc package, of every server (router, Envoy's rate
// limit service) and of the components that dial shards (hand-offs, the
// rebalance job) import it; nothing outside tests may.
package rpctest
