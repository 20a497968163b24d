//go:build tools

// Package tools pins the source of promtool, built by
// deploy/install-promtool.sh when Debian's package is not at hand. It is a
// module of its own, so that Prometheus' dependencies stay out of
// shardlimit's go.mod.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
