package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// version and revision are set by the Makefile's build target, from `git
// describe --tags --always --dirty` and `git rev-parse HEAD`:
//
//	go build -ldflags "-X main.version=v1.2.0-3-gabc1234-dirty -X main.revision=abc1234..." ./cmd/shardlimit
//
// Where they are empty (go build, go install, a build outside git) the
// build info's module version and VCS revision are used, else "dev" and
// "unknown". The linker's are needed because Go stamps no VCS information
// in a git worktree or with -buildvcs=false.
var version, revision string

// buildInfo says which build of shardlimit this is.
type buildInfo struct {
	// Version: the linker's version, else the module's, else "dev".
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from; "unknown" when
	// it was built outside a checkout (or with -buildvcs=false).
	Revision string `json:"revision"`
	// Modified: the checkout had uncommitted changes.
	Modified bool `json:"modified"`
	// CommitTime is the commit's time, RFC 3339; empty when unknown.
	CommitTime string `json:"commit_time,omitempty"`
	GoVersion  string `json:"go_version"`
	Platform   string `json:"platform"`
}

// build returns this binary's build info, read once.
var build = sync.OnceValue(func() buildInfo {
	b := buildInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.GoVersion = bi.GoVersion
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			case "vcs.time":
				b.CommitTime = s.Value
			}
		}
	}
	if revision != "" && b.Revision == "unknown" {
		b.Revision = revision
		b.Modified = strings.HasSuffix(version, "-dirty")
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
})

// text prints the build info for people.
func (b buildInfo) text() string {
	rev := b.Revision
	if b.Modified {
		rev += " (modified: uncommitted changes)"
	}
	if b.CommitTime != "" {
		rev += ", committed " + b.CommitTime
	}
	return fmt.Sprintf("shardlimit %s\n  commit: %s\n  go:     %s %s\n", b.Version, rev, b.GoVersion, b.Platform)
}

func versionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary (also: shardlimit --version).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			b := build()
			return printOutput(cmd.OutOrStdout(), output, b, func() error {
				_, err := fmt.Fprint(cmd.OutOrStdout(), b.text())
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputUsage)
	return cmd
}

// registerBuildInfo adds shardlimit_build_info{version,revision,goversion} 1
// to a component's registry, so that dashboards and alerts see which build
// every process runs.
func registerBuildInfo(reg prometheus.Registerer) error {
	b := build()
	rev := b.Revision
	if b.Modified {
		rev += "-modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "shardlimit_build_info",
		Help:        "Always 1; the labels say which build of shardlimit the process runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": rev, "goversion": b.GoVersion},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("shardlimit_build_info: %w", err)
	}
	return nil
}
