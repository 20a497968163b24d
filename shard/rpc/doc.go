// Package rpc is how every shardlimit component serves gRPC and calls
// another component: Listen builds the one kind of server that the router,
// the shard and the rebalance job all run (listener, TLS credentials,
// health, reflection), and DialCreds gives the matching client side. Each
// component passes its auth.Authorizer's interceptors (package shard/auth)
// as server options, so that every call, health and reflection included,
// is decided by the one method table.
//
// It lives under shard/ because shards are the bottom of the component
// graph (see package etcd). It registers no service of its own besides
// health and reflection, and must never import a component package.
package rpc
