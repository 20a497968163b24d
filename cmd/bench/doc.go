// Package bench is shardlimit's load generator: `shardlimit bench` loads
// routers through the public API (shardlimit.v1.RateLimiter/Check, over
// gRPC or, APIHTTP, as JSON through the router's HTTP/JSON API) or
// Envoy's rate limit API v3 (ShouldRateLimit) and reports throughput,
// latency quantiles, allowed, denied and failure-policy answers (on Envoy's
// API, the descriptors the response's dynamic metadata marks:
// envoy.FailurePolicyOf), errors by gRPC code, and its own CPU per request. With Options.Baseline it first
// runs the same load against BaselineServer, an in-process no-op server
// with the same message shapes, so that every figure can be read as a
// ratio of what this client, gRPC and this machine allow in the same run.
// `shardlimit bench table` (Table) starts the clusters of `shardlimit dev`
// through its launcher (cmd/internal/cluster: the values of their
// addresses, pids and credentials, never dev's text) and runs the whole
// table against them. `shardlimit bench fleet` (Fleet) starts growing
// clusters through the same launcher, with etcd as a process of its own,
// and measures the control plane instead of the request path: the start
// until every router routes to every shard, etcd at steady state and per
// membership change (its /metrics and /proc), the operator's view, and
// with FleetOptions.Rolling a rolling restart under a load of users
// consuming a budget (rolling.go), checked to the hit, with the routers'
// counters that say why checks were answered by policy; with
// FleetOptions.Users, distinct users checked once each and the shards'
// memory per shard and per key (fleetusers.go).
//
// Run is called by cmd/shardlimit and by tests. A closed loop keeps
// Options.Concurrency requests in flight; an open loop (Options.Rate)
// issues requests on a schedule and measures each from its scheduled time,
// so a slow answer cannot hide the requests it delayed. Options.Flood
// makes a share of the checks each for a user never seen before (the
// report counts them, per minute), named at random or, with
// FloodSamePlacement, all on one placement hash (shard/key/keytest); Options.Legit checks a fixed set of
// users on a schedule of their own, one goroutine beside the workers at a
// few requests a second (legit.go), and reports their decisions apart, so
// that runs with and without a flood compare exactly. Given several
// router addresses, a worker whose router is gone (UNAVAILABLE) sends its
// request once more to the next address and stays there, so a killed or
// restarted router costs the load no errors (Phase.Failovers counts them).
//
// The bench must never be the bottleneck it measures, so on the request
// path it must never start a goroutine, build a message, format a user
// name, take a lock shared between workers, or allocate beyond what gRPC
// (or, for APIHTTP, net/http and JSON) itself does: each worker owns its message (only the users change), its
// random generator, its connection share and its stats (an atomic
// log-linear histogram, see QuantileErrorBound), and they are merged after
// the run. It must never write the live line except to a terminal the
// caller passed, and never count an answer it cancelled itself (Ctrl-C)
// as the server's error. Its CPU per request is meaningful at saturation:
// at a few hundred requests per second Go's idle wake-ups dominate it.
package bench
