package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
)

// runCtl runs ctl in process and returns its standard output and error.
func runCtl(args ...string) (stdout, stderr string, err error) {
	cmd := ctlCmd()
	cmd.SilenceUsage = true // as main does
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

const envoyMessaging = `domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        detailed_metric: true
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`

const envoyEdge = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: "/api/*"
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 20, name: api}
`

// `ctl rules import --from-envoy DIR` prints a rules file that apply
// accepts, and notes on standard error with file and line; --strict fails
// on what cannot be expressed and prints no rules.
func TestRulesImportFromEnvoy(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{"messaging.yaml": envoyMessaging, "edge.yml": envoyEdge, "README.md": "not config"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := runCtl("rules", "import", "--from-envoy", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	rs, err := rules.Parse("imported.yaml", []byte(out))
	if err != nil {
		t.Fatalf("the output does not parse: %v\n%s", err, out)
	}
	set := rules.NewSet(rs)
	if len(set.Descriptors("edge")) != 3 || len(set.Descriptors("messaging")) != 2 {
		t.Fatalf("rules:\n%s", out)
	}
	for _, want := range []string{"# from " + filepath.Join(dir, "edge.yml") + ":7", "deny_all: true", "value: /api/*", "name: api", "shadow: true", "algorithm: fixed_window"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if want := filepath.Join(dir, "messaging.yaml") + ":6: cannot express: detailed_metric"; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}

	out, _, err = runCtl("rules", "import", "--from-envoy", filepath.Join(dir, "messaging.yaml"), "--strict")
	if exitCode(err) != exitFailed || out != "" || !strings.Contains(err.Error(), "1 item cannot be expressed") {
		t.Errorf("--strict: exit %d, %v, output %q", exitCode(err), err, out)
	}
	out, _, err = runCtl("rules", "import", "--from-envoy", filepath.Join(dir, "edge.yml"), "--strict", "--algorithm", "sliding_window")
	if err != nil || !strings.Contains(out, "algorithm: sliding_window") {
		t.Errorf("--strict on an exact file: %v\n%s", err, out)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCtl("rules", "import", "--from-envoy", bad); err == nil || !strings.Contains(err.Error(), "no *.yaml or *.yml file") {
		t.Errorf("empty directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(bad, "x.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCtl("rules", "import", "--from-envoy", bad)
	if exitCode(err) != exitFailed || out != "" || !strings.Contains(err.Error(), filepath.Join(bad, "x.yaml")+`:4: invalid envoy ratelimit config: rate_limit: invalid unit "fortnight"`) {
		t.Errorf("invalid config: exit %d, %v", exitCode(err), err)
	}
}

// envoy ratelimit's own example directory imports: quota_mode is a
// "cannot express" line, an error only under --strict.
func TestRulesImportEnvoyExamples(t *testing.T) {
	dir := filepath.Join("..", "..", "router", "envoy", "envoyconfig", "testdata", "envoy-examples")
	out, errOut, err := runCtl("rules", "import", "--from-envoy", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if _, err := rules.Parse("imported.yaml", []byte(out)); err != nil {
		t.Fatalf("the output does not parse: %v\n%s", err, out)
	}
	if want := filepath.Join(dir, "quota.yaml") + ":5: cannot express: quota_mode: converted as shadow"; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	out, _, err = runCtl("rules", "import", "--from-envoy", dir, "--strict")
	if exitCode(err) != exitFailed || out != "" || !strings.Contains(err.Error(), "2 items cannot be expressed") {
		t.Errorf("--strict: exit %d, %v, output %q", exitCode(err), err, out)
	}
}

// rules diff and apply show a descriptor rule by its descriptor.
func TestChangesShowDescriptors(t *testing.T) {
	resp := &shardlimitv1.ApplyRulesResponse{Changes: []*shardlimitv1.RuleChange{
		{Op: shardlimitv1.RuleChange_OP_ADD, Service: "edge", Name: "per-ip", After: "service: edge\nname: per-ip\ndescriptor:\n  - key: remote_address\n  - key: path\n    value: /checkout\nlimit: 1\nperiod: 1s\n"},
		{Op: shardlimitv1.RuleChange_OP_DELETE, Service: "shop", Name: "x", Before: "service: shop\nendpoint: /x\nlimit: 1\nperiod: 1s\n"},
	}}
	var b bytes.Buffer
	if err := printChanges(&b, "text", resp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "+ edge/per-ip  (descriptor: remote_address,path=/checkout)\n") || !strings.Contains(b.String(), "- shop/x\n") || strings.Contains(b.String(), "envoy:") {
		t.Errorf("changes:\n%s", b.String())
	}
}
