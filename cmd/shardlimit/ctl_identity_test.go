package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shardlimit/shardlimit/router/clustertest"
)

// rules apply and diff warn, one line per case, when a change leaves an
// endpoint to shadow rules alone: a shadow rule for /search hides the
// enforcing "*" rule.
func TestCtlRulesWarnWhenShadowHidesEnforcing(t *testing.T) {
	const base = "rules:\n  - {service: shop, endpoint: '*', name: all, limit: 120, period: 1m}\n"
	c := ctlCluster(t, base, clustertest.Options{Shards: 1})
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctl := func(args ...string) (string, string, error) { return runCtl(append(args, operatorFlags(c)...)...) }
	if _, stderr, err := ctl("rules", "apply", "-f", write("base.yaml", base)); err != nil || stderr != "" {
		t.Fatalf("apply the base: %v %q", err, stderr)
	}
	shadow := write("shadow.yaml", base+"  - {service: shop, endpoint: /search, name: search-trial, limit: 100, period: 1m, shadow: true}\n")
	const want = "warning: shop /search: no enforcing rule decides it any more, only shadow rule search-trial, which never denies; enforcing rule all no longer applies to it\n"
	for _, args := range [][]string{{"rules", "diff", "-f", shadow}, {"rules", "apply", "--dry-run", "-f", shadow}, {"rules", "apply", "-f", shadow}} {
		out, stderr, err := ctl(args...) // diff exits exitChanges
		if !strings.HasPrefix(stderr, want) || strings.Count(stderr, "warning:") != 1 || !strings.Contains(out, "+ shop/search-trial") {
			t.Errorf("%v: stdout %q, stderr %q (%v), want the warning once", args, out, stderr, err)
		}
	}
	// Applied already: no change, no warning.
	if _, stderr, err := ctl("rules", "diff", "-f", shadow); err != nil || stderr != "" {
		t.Errorf("diff after the apply: %v %q", err, stderr)
	}
}

// token create --ttl stores an expiry that create and list show; a ttl
// out of bounds names the field.
func TestCtlTokenTTL(t *testing.T) {
	c := ctlCluster(t, "rules: []\n", clustertest.Options{Shards: 1})
	ctl := func(args ...string) (string, string, error) { return runCtl(append(args, operatorFlags(c)...)...) }
	if _, _, err := ctl("grants", "grant", "--id", "spiffe://x/edge", "--role", "service", "--service", "shop"); err == nil || !strings.Contains(err.Error(), "id: the id must name its kind") {
		t.Errorf("grant without a kind: %v", err)
	}
	if _, _, err := ctl("grants", "grant", "--id", "token:edge", "--role", "internal"); err == nil || !strings.Contains(err.Error(), "role: internal is granted only by the components' grants file") {
		t.Errorf("grant internal: %v", err)
	}
	if out, _, err := ctl("grants", "grant", "--id", "token:edge", "--role", "service", "--service", "shop"); err != nil || !strings.HasPrefix(out, "granted token:edge role service for shop") {
		t.Fatalf("grant: %q %v", out, err)
	}
	if _, _, err := ctl("grants", "token", "create", "--id", "token:edge", "--ttl", "10s"); err == nil || !strings.Contains(err.Error(), "ttl: 10s is outside [1m0s, 87600h0m0s]") {
		t.Errorf("ttl 10s: %v", err)
	}
	out, _, err := ctl("grants", "token", "create", "--id", "token:edge", "--ttl", "24h")
	if err != nil || !regexp.MustCompile(`^token [0-9a-f]{12} for token:edge, created \S+ \(expires \S+\); it is shown this once`).MatchString(out) {
		t.Fatalf("create: %q %v", out, err)
	}
	out, _, err = ctl("grants", "list")
	if err != nil || !regexp.MustCompile(`token:edge\s+service\s+shop\s+[0-9a-f]{12} \(expires 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\s+etcd`).MatchString(out) {
		t.Errorf("list: %q %v", out, err)
	}
}
