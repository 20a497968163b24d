// Package deploy holds what it takes to run and watch shardlimit outside
// `dev`: rules files (rules/), Prometheus alert rules with their promtool
// tests (prometheus/) and runbook (RUNBOOK.md), a Grafana dashboard
// (grafana/), Kubernetes manifests (k8s/), and Envoy, Compose and Istio
// examples (envoy/, istio/).
//
// Its Go code embeds the sample rules for the binary (`shardlimit dev`
// loads rules/sample.yaml when no rules file is given), holds the metric
// contract (Metrics) that the alerts and the dashboard are written
// against, and tests all of the above: the alerts with promtool, the
// dashboard's queries against the contract, every manifest strictly
// against the Kubernetes API types and the binary's flags, and every Envoy
// document strictly against Envoy's v3 API types.
package deploy

import _ "embed"

// SampleRules is rules/sample.yaml.
//
//go:embed rules/sample.yaml
var SampleRules []byte
