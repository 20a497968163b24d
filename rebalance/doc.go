// Package rebalance holds the shard map and, in time, the job that changes
// it. Sub-package shardmap is the one deterministic function from (shard
// map, live members) to the owner of every partition that routers and the
// rebalance job share, so that they agree without talking to each other.
package rebalance
