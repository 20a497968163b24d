// Package robustness is the robustness suite (issue 24): a cluster of
// real processes (etcd, three shards, two routers, the rebalance job),
// each in a network namespace of its own (cmd/robustness/netns), runs a
// workload of every algorithm through the Go client, Envoy's rate limit
// API and the HTTP/JSON API while a seeded, randomized schedule of faults
// (Schedule: cuts, one-way drops, splits, signals, some aimed at a
// drain's hand-off, rebalances, rule changes) runs; every check is recorded on the client side and the
// history is proved against the rules by cmd/robustness/checker, which
// shares no code with the limiter.
//
// The package's code is the schedule, a pure function of a seed, and
// MayReset, which says which of its faults the checker allows to restart
// counters from zero (the design's bound on a crash); the suite itself is
// its test (robustness_test.go): `make test` runs fixed
// seeds in a short form, `make robustness` random or given seeds for a
// given length, and each seed that found a bug has a make target of its
// own, and a scripted test where the seed's run could not assert the bug
// (regression_test.go). The report attributes each policy answer to the
// shard that owned its key, by etcd (owners_test.go). It needs root
// (namespaces, iptables) and skips without it.
package robustness
