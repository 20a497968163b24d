// Package rpc is how every shardlimit component serves gRPC and calls
// another component: Listen builds the one kind of server that the router,
// the shard and the rebalance job all run (listener, TLS credentials,
// health, reflection), and DialCreds gives the matching client side. Each
// component passes its auth.Authorizer's interceptors (package shard/auth)
// as server options, so that every call, health and reflection included,
// is decided by the one method table.
//
// Every server is bounded by Limits (limits.go): connections (a listener
// that closes the ones past --max-connections and counts them), calls in
// flight per connection, message sizes, idle and maximum connection age,
// and keepalive enforcement; the components turn their Limits into server
// options for Listen. Every server answers invalid UTF-8 in a request's
// strings InvalidArgument naming the field (codec.go), for every service
// registered through Server.RegisterService — the generated Register
// functions take the Server itself, never its GRPC field.
//
// It lives under shard/ because shards are the bottom of the component
// graph (see package etcd). It registers no service of its own besides
// health and reflection, and must never import a component package.
package rpc
