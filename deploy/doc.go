// Package deploy holds what it takes to run and watch shardlimit outside
// `dev`: rules files (rules/), Prometheus alert rules with their promtool
// tests (prometheus/) and runbook (RUNBOOK.md), a Grafana dashboard
// (grafana/), and Kubernetes manifests (k8s/).
//
// Its Go code embeds the sample rules for the binary (`shardlimit dev`
// loads rules/sample.yaml when no rules file is given), holds the metric
// contract (Metrics) that the alerts and the dashboard are written
// against, and tests all of the above: the alerts with promtool, the
// dashboard's queries against the contract, and every manifest strictly
// against the Kubernetes API types and the binary's flags.
package deploy

import _ "embed"

// SampleRules is rules/sample.yaml.
//
//go:embed rules/sample.yaml
var SampleRules []byte
