// Package rpc is how every shardlimit component serves gRPC and calls
// another component: Listen builds the one kind of server that the router,
// the shard and the rebalance job all run (listener, TLS credentials,
// health, reflection), and DialOptions gives the matching client side
// (dial.go: credentials, and a connection that a cut network closes within
// a second and that is dialed again within a second of the heal). Each
// component passes its auth.Authorizer's interceptors (package shard/auth)
// as server options, so that every call, health and reflection included,
// is decided by the one method table.
//
// Every server is bounded by Limits (limits.go): connections (ConnBound,
// bound.go: a listener that closes the ones past --max-connections, or past
// --max-connections-per-peer from one client IP, and counts them by
// reason), the handshake deadline (--handshake-timeout: a connection that
// has not finished TLS and the HTTP/2 preface by then is closed and
// counted), the authentication deadline (--auth-timeout, authtimeout.go: a
// connection that has not authenticated by then is closed and counted;
// the component's auth.Authorizer, as ConnAuthenticator, judges a
// connection's certificate, and its interceptor marks the connection of
// every identified call through package connauth), calls in flight per connection, message sizes, idle and maximum
// connection age, and keepalive enforcement; the components turn their
// Limits into server options for Listen. These bounds hold before any
// caller is authenticated: they are what an anonymous client can take
// (see package auth's review of what it reaches). Every server answers invalid UTF-8 in a request's
// strings InvalidArgument naming the field (codec.go), for every service
// registered through Server.RegisterService — the generated Register
// functions take the Server itself, never its GRPC field. Servers and
// DialOptions' connections encode the request path's messages with
// package vtcodec's generated code, forced on them, not registered.
//
// It registers no service of its own besides health and reflection, and
// must never import a component package.
package rpc
