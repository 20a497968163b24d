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
	"shardlimit_router_envoy_descriptors_total",   // {service,rule,kind}: unlimited, deny_all, replaced, override(_refused)
	"shardlimit_router_decision_duration_seconds", // histogram, per Check RPC
	"shardlimit_router_shard_errors_total",        // {shard,reason}
	"shardlimit_router_shard_call_checks",         // histogram, checks per call to a shard
	"shardlimit_router_stream_message_checks",     // histogram, checks per CheckStream message from callers
	"shardlimit_router_members",
	"shardlimit_router_unreachable_shards",
	"shardlimit_router_member_changes_total",
	"shardlimit_router_refunds_total",
	"shardlimit_router_rules",
	"shardlimit_router_rules_invalid",
	"shardlimit_router_rules_over_bound",
	"shardlimit_router_rule_reloads_total",
	"shardlimit_router_rule_limit",          // {service,endpoint,rule}: hits allowed per period, one series per rule in force
	"shardlimit_router_rule_period_seconds", // {service,endpoint,rule}
	"shardlimit_router_shardmap_version",
	"shardlimit_router_shardmap_age_seconds",
	"shardlimit_router_etcd_up",
	"shardlimit_router_overlimit_cache_hits_total", // {service}
	"shardlimit_router_overlimit_cache_entries",
	"shardlimit_router_overlimit_cache_evictions_total",
	"shardlimit_router_http_requests_total",                // {api,code}: the HTTP/JSON API (--http-listen)
	"shardlimit_router_connections",                        // open gRPC connections
	"shardlimit_router_connections_refused_total",          // {reason}: global, per_peer, handshake_timeout, auth_timeout
	"shardlimit_router_auth_refusals_total",                // {api,reason}
	"shardlimit_router_insecure",                           // 1 when started with --insecure
	"shardlimit_router_grants",                             // identities granted a role (grants file and etcd)
	"shardlimit_router_grants_invalid",                     // grants in etcd that are not valid (their identities are refused)
	"shardlimit_router_grants_last_sync_timestamp_seconds", // when the grants in force last matched etcd
	// The HTTP API's own connection bound (--http-listen, --http-max-connections).
	"shardlimit_router_http_connections",
	"shardlimit_router_http_connections_refused_total", // {reason}
	// {cert}: server, client, ca, etcd_client, etcd_ca: the notAfter of
	// each certificate loaded, set whenever it (re)loads; no series with
	// --insecure. The shardlimit command registers it, and the shard's and
	// the rebalance job's (cmd/shardlimit/tls.go).
	"shardlimit_router_certificate_expiry_timestamp_seconds",
	"shardlimit_router_etcd_insecure", // 1 when it reaches etcd in plain text; the shardlimit command registers it

	// Shard (shardlimit shard --metrics-listen).
	"shardlimit_shard_decisions_total",           // {algorithm,result}
	"shardlimit_shard_decision_duration_seconds", // histogram, per batch
	"shardlimit_shard_load",                      // decisions over the last minute
	"shardlimit_shard_partition_load",            // {partition}, partitions with load only
	"shardlimit_shard_keys",
	"shardlimit_shard_memory_bytes",       // every key of every algorithm
	"shardlimit_shard_memory_limit_bytes", // --max-memory
	"shardlimit_shard_evictions_total",    // {reason}: idle, active, over_limit
	"shardlimit_shard_expirations_total",
	"shardlimit_shard_setup_seconds", // process start → serving and registered
	"shardlimit_shard_registered",
	"shardlimit_shard_held_out",
	"shardlimit_shard_lease_suspended",
	"shardlimit_shard_episodes",
	"shardlimit_shard_episodes_dropped_total", // {reason}: closed, open
	"shardlimit_shard_etcd_up",
	"shardlimit_shard_connections",
	"shardlimit_shard_connections_refused_total",
	"shardlimit_shard_auth_refusals_total", // {api,reason}
	"shardlimit_shard_insecure",
	"shardlimit_shard_grants",
	"shardlimit_shard_grants_invalid",
	"shardlimit_shard_grants_last_sync_timestamp_seconds",
	"shardlimit_shard_certificate_expiry_timestamp_seconds",
	"shardlimit_shard_etcd_insecure",
	"shardlimit_shard_state",                   // {state}: joining, serving, draining
	"shardlimit_shard_handoff_keys_total",      // {direction}: in, out
	"shardlimit_shard_handoff_last_seconds",    // {kind}: join, drain, give_back, takeover
	"shardlimit_shard_takeovers_total",         // {result}: exact, unreachable, timeout, again
	"shardlimit_shard_healed_partitions_total", // stuck, taken back: a protocol gap
	"shardlimit_shard_partitions",              // {state}: owned, pending, fenced, unowned, receiving
	"shardlimit_shard_not_decided_total",
	"shardlimit_shard_forwarded_checks_total", // {result}: decided, not_decided, error
	"shardlimit_shard_hot_keys_decisions",     // decisions the hot-key counts cover
	"shardlimit_shard_hot_keys_sampled_ratio", // of which sampled (past --top-keys-exact); 0: exact
	"shardlimit_shard_hot_keys_max_error",     // widest ± of the top keys' counts

	// Rebalance (shardlimit rebalance --metrics-listen).
	"shardlimit_rebalance_leader",
	"shardlimit_rebalance_runs_total", // {outcome}
	"shardlimit_rebalance_moves_total",
	"shardlimit_rebalance_unreachable_evictions_total",
	"shardlimit_rebalance_last_success_timestamp_seconds",
	"shardlimit_rebalance_interval_seconds",
	"shardlimit_rebalance_load_ratio", // {when}
	"shardlimit_rebalance_etcd_up",
	"shardlimit_rebalance_connections",
	"shardlimit_rebalance_connections_refused_total",
	"shardlimit_rebalance_auth_refusals_total", // {api,reason}
	"shardlimit_rebalance_insecure",
	"shardlimit_rebalance_grants",
	"shardlimit_rebalance_grants_invalid",
	"shardlimit_rebalance_grants_last_sync_timestamp_seconds",
	"shardlimit_rebalance_certificate_expiry_timestamp_seconds",
	"shardlimit_rebalance_etcd_insecure",
}

// Histograms are the members of Metrics that are histograms: queries name
// them with the _bucket, _sum or _count suffix.
var Histograms = []string{
	"shardlimit_router_decision_duration_seconds",
	"shardlimit_router_shard_call_checks",
	"shardlimit_router_stream_message_checks",
	"shardlimit_shard_decision_duration_seconds",
}
