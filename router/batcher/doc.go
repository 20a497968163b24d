// Package batcher coalesces work bound for one destination: a Queue lets
// at most Calls calls to it be in flight, and whatever arrives while they
// all are waits and leaves together in the next call, so many concurrent
// requests share one message. Each call, before it takes its batch,
// yields to the goroutines ready to run, once, and again while the line
// grows:
// under load those are the requests about to add their items, which then
// leave in this call instead of one message each. An idle destination adds
// no waiting: with nothing else ready, the yield returns at once and the
// item goes out alone.
//
// The router keeps a Queue per shard and hands it the checks of each
// request bound for that shard; the Queue calls the router's send function
// with a batch, and the router makes the one RPC for it. The caller that
// adds an item may run its call itself (inline), so a lone request costs no
// goroutine; a call that finds more work queued when it ends hands that
// work on to a worker goroutine, never one per item. Workers go from batch
// to batch, and linger a second for the next before they end, so that
// under load calls run on goroutines whose stacks have already grown.
//
// A Queue is bounded, and shared fairly among classes (the router's
// services): past MaxWaiting weight (checks) queued, Add lets an item in
// only if its class, with it, holds no more than its share of MaxWaiting
// (divided among the classes waiting), displacing the newest items of the
// class holding the most, which it hands back to be shed; otherwise it
// refuses the item, and the caller sheds it. Calls take the classes'
// items in turn, each class's in arrival order, so a class with little
// waiting is not stuck behind another's flood. The policy is a pure type
// (fair.go), stated by a table test. A Queue knows nothing of gRPC, rules
// or shards, never reorders the items of one class, drops an accepted
// item only by handing it to shed, and never calls send for an empty
// batch.
package batcher
