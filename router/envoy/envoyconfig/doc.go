// Package envoyconfig converts envoy ratelimit's configuration (the YAML
// files of github.com/envoyproxy/ratelimit: one domain per file, nested
// descriptors with key, value, rate_limit, shadow_mode, quota_mode,
// detailed_metric, value_to_metric, share_threshold) into shardlimit
// descriptor rules, and reports, per item with file and line, what the
// rules cannot express.
//
// Parse reads one file into a Config, rejecting what envoy ratelimit
// rejects (unknown keys, a missing key or unit, a unit with unlimited,
// duplicate descriptors, share_threshold without a '*' value). Convert turns configs into rules: each
// descriptor with a rate_limit becomes a rule whose descriptor is the path
// from the top of its domain; a value ending in '*' stays a prefix
// wildcard; unlimited becomes unlimited, requests_per_unit: 0 deny_all,
// shadow_mode shadow, quota_mode shadow too (noted: quota mode's dynamic
// metadata is not sent), name the rule's name, replaces its replaces; a
// descriptor without a rate_limit that envoy ratelimit would match (a leaf,
// or a placeholder another rule would otherwise decide) becomes an
// unlimited rule, since envoy ratelimit answers it without a limit.
// detailed_metric and value_to_metric (per-value metrics) are noted and
// left out, and so is share_threshold (one counter for a wildcard's
// values: the rule counts each value on its own); a key envoy ratelimit
// does not know is an error, as there.
//
// envoy ratelimit walks its tree greedily, never backtracking, while
// router/envoy's Match picks the most specific rule; Convert probes every
// overlap of the configuration against a model of envoy ratelimit's walk
// (Config.Lookup) and reports each descriptor the two would decide
// differently.
//
// ctl rules import calls it. It is pure: it reads no file but through
// ParseFile and never talks to etcd or the network.
package envoyconfig
