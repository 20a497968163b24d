// Package keytest makes counter keys that collide under package key's
// public hashes, as an attacker can (issue 23): many users with one
// placement hash, and pairs with one whole 128-bit Make.
//
// Tests of the shard's store and the router's over-limit cache use it to
// show that such users still keep counters and denials of their own. It is
// test support only: production code must never import it.
package keytest
