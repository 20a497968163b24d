// Package shardcall carries a router's batches to one shard over a single
// DecideStream that it keeps open: Conn.Decide sends a batch as one
// message and waits for its answer. Batches in flight on the stream are
// answered in the order sent, each with its batch id, so a message costs a
// frame each way instead of a whole RPC (headers, a stream, a status).
//
// The router keeps a Conn per shard and calls Decide from its per-shard
// queue (package batcher). The deadline judges the shard, not the router:
// a batch fails only when its stream has answered nothing for the deadline
// while it waited (answers to earlier batches show the shard at work), and
// only after a short grace in which the router's own scheduling can catch
// up with answers already received. Then, or when the stream breaks, every
// batch in flight on it fails and the next Decide opens a new stream: a
// stalled stream is never reused.
//
// Alive is the liveness check of the router's circuit breaker: a unary
// call with no checks, which a shard starved of CPU still answers while
// its batches miss the deadline, and a stopped, cut-off or dead one does
// not.
//
// It logs at debug the streams it opens and reopens and why each ended.
// It judges nothing: failures go back to the caller, whose circuit breaker
// decides what they mean. It holds no rules and never retries a batch (a
// shard may have decided it).
package shardcall
