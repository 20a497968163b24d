// Package grantstore keeps grants in etcd, one identity per key at
// <prefix>grants/<identity-id>, the id naming its kind (grants/uri:...,
// grants/dns:..., grants/token:...), the value being the grant in YAML
// (role, services, token hashes and expiries: never a token).
//
// Grants stored before kinds sit at the key of their id without a kind;
// they are read by auth.ParseID (uri: if the id is an absolute URI, else
// token:) and listed with their canonical id. Modify reads one there when
// the canonical key holds none, and its write moves it: it puts the
// canonical key and deletes the old one in one transaction. A grant at an
// old key whose identity also has one at its canonical key is left out as
// invalid.
//
// No grant of role internal is stored (Modify refuses it with
// ErrInternalInEtcd) or read (one found is invalid): only the components'
// grants files grant internal.
//
// Modify changes one grant in a transaction that succeeds only if the grant
// did not change since it was read, retrying a few times. Watch follows the
// prefix with etcd.Follow and calls back with every valid grant after each
// change. Follow also checks every 5 s that the grants in force still
// match etcd, for the last-sync metric (auth.Authorizer.GrantsSynced).
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
