// Package grantstore keeps grants in etcd, one identity per key at
// <prefix>grants/<identity-id>, the value being the grant in YAML (role,
// services, token hashes: never a token).
//
// Modify changes one grant in a transaction that succeeds only if the grant
// did not change since it was read, retrying a few times. Watch follows the
// prefix with etcd.Follow and calls back with every valid grant after each
// change.
//
// A stored value that is not a valid grant (or is stored under another
// identity's key) is left out, logged and counted: its identity is refused
// until it is fixed. Unlike a rule, it does not keep its last valid value,
// so every router and shard, however long it has run, holds the same grants
// for the same etcd contents, and a broken grant fails closed.
//
// The grant model and its validation live in package auth; this package is
// only the etcd edge. It must never log a token (it holds none: only
// hashes).
package grantstore
