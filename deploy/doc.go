// Package deploy holds what it takes to run shardlimit outside `dev`:
// rules files (rules/), and in time Kubernetes manifests, Prometheus alert
// rules with their tests, and a Grafana dashboard. Go code here only embeds
// those files so that the binary can ship them (`shardlimit dev` loads
// rules/sample.yaml when no rules file is given).
package deploy

import _ "embed"

// SampleRules is rules/sample.yaml.
//
//go:embed rules/sample.yaml
var SampleRules []byte
