// Package keytest makes counter keys that collide under package key's
// public hashes, as an attacker can (issue 23): many printable users with
// one placement hash (Colliding), and pairs with one whole 128-bit Make.
//
// Tests of the shard's store and the router's over-limit cache use it to
// show that such users still keep counters and denials of their own, and
// the load generator (cmd/bench, `--flood-names same-placement`) floods a
// cluster with them. It is test and load support only: the router, the
// shards and the rebalance job must never import it.
package keytest
