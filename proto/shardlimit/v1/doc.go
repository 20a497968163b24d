// Package shardlimitv1 is the Go code generated from the .proto files
// beside it (ratelimit.proto: the public RateLimiter API; shard.proto: the
// internal shard API; admin.proto: the operators' API; rebalance.proto:
// the rebalance job's API) by `make proto`. Only this file is written by
// hand; never edit the generated files.
package shardlimitv1
