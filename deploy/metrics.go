package deploy

// Metrics are the metric families that shardlimit's components export, by
// the names their registries gather (a counter's name ends in _total, a
// histogram's is the base name of its _bucket, _sum and _count series). It
// is the contract between the components and everything in deploy/ that
// queries them: the alert rules in prometheus/alerts.yaml and the dashboard
// in grafana/shardlimit.json name no other metric of shardlimit's own
// (TestQueriesNameOnlyKnownMetrics). The Go runtime and process collectors
// (go_*, process_*) and Prometheus' own up series come on top.
var Metrics = []string{
	// Every component: {version,revision,goversion} of the binary, always 1.
	// The shardlimit command registers it (cmd/shardlimit/version.go).
	"shardlimit_build_info",

	// Router (shardlimit router --metrics-listen).
	"shardlimit_router_decisions_total",           // {service,endpoint,rule,algorithm,result}
	"shardlimit_router_decision_duration_seconds", // histogram, per Check RPC
	"shardlimit_router_shard_errors_total",        // {shard,reason}
	"shardlimit_router_shard_call_checks",         // histogram, checks per call to a shard
	"shardlimit_router_members",
	"shardlimit_router_member_changes_total",
	"shardlimit_router_refunds_total",
	"shardlimit_router_rules",
	"shardlimit_router_rules_invalid",
	"shardlimit_router_rule_reloads_total",
	"shardlimit_router_shardmap_version",
	"shardlimit_router_shardmap_age_seconds",
	"shardlimit_router_etcd_up",

	// Shard (shardlimit shard --metrics-listen).
	"shardlimit_shard_decisions_total",           // {algorithm,result}
	"shardlimit_shard_decision_duration_seconds", // histogram, per batch
	"shardlimit_shard_load",                      // decisions over the last minute
	"shardlimit_shard_partition_load",            // {partition}, partitions with load only
	"shardlimit_shard_keys",
	"shardlimit_shard_memory_bytes",
	"shardlimit_shard_evictions_total",
	"shardlimit_shard_expirations_total",
	"shardlimit_shard_setup_seconds", // process start → serving and registered
	"shardlimit_shard_registered",
	"shardlimit_shard_episodes",
	"shardlimit_shard_etcd_up",

	// Rebalance (shardlimit rebalance --metrics-listen).
	"shardlimit_rebalance_leader",
	"shardlimit_rebalance_runs_total", // {outcome}
	"shardlimit_rebalance_moves_total",
	"shardlimit_rebalance_last_success_timestamp_seconds",
	"shardlimit_rebalance_interval_seconds",
	"shardlimit_rebalance_load_ratio", // {when}
	"shardlimit_rebalance_etcd_up",
}

// Histograms are the members of Metrics that are histograms: queries name
// them with the _bucket, _sum or _count suffix.
var Histograms = []string{
	"shardlimit_router_decision_duration_seconds",
	"shardlimit_router_shard_call_checks",
	"shardlimit_shard_decision_duration_seconds",
}
