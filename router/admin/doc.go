// Package admin serves the Admin API (shardlimit.v1.Admin) on a router's
// gRPC port: the rules and grants stored in etcd (ApplyRules, GetRules,
// DeleteRule; ListGrants, Grant, Revoke, CreateToken), what the shards
// the router routes to say (ListMembers with each shard's Stats,
// ListLimited, ResetKey on the counter's owner), and the rebalance job's
// work: RebalancePlan and RebalanceRun are forwarded to the elected
// leader, RebalanceRunStream and WatchRebalanceRun follow a run's record
// in etcd (etcd.Follow) and turn it into events (runstore.Events), and
// RebalanceRuns and ShardMapHistory read what the job recorded.
//
// The router registers it (Register) with a Router: the little it needs
// of the router, as package envoy needs a Decider. It is never on the
// path of a check: it decides nothing, holds no counters and no routing
// of its own, and its calls are authorized by the router's Authorizer
// before they reach it (the methods a service may call check each service
// the request names, and ListMembers leaves out what a service may not
// read). It must never import the router itself, the shard host or the
// rebalance job.
package admin
