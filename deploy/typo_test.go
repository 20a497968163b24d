package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardlimit/shardlimit/router/rules"
)

// A typo anywhere in the Envoy, Istio and Compose examples or their rules
// is refused by the loader the tests use: each case mutates one document
// (a misspelt field, enum value or type, a value out of its bounds, a
// duplicate key) and the document that loaded before must then fail.
func TestExamplesRejectTypos(t *testing.T) {
	bootstrap := func(b []byte) error { _, err := loadBootstrap(b); return err }
	envoyFilter := func(b []byte) error { _, err := loadEnvoyFilter(b); return err }
	composeDoc := func(b []byte) error { _, err := loadCompose(b); return err }
	rulesDoc := func(b []byte) error { _, err := rules.Parse(envoyRulesFile, b); return err }
	for _, tc := range []struct {
		why, file, old, new string
		load                func([]byte) error
	}{
		{"field of the connection manager", "envoy/envoy.yaml", "use_remote_address:", "use_remote_adress:", bootstrap},
		{"field inside the filter's typed_config", "envoy/envoy.yaml", "failure_mode_deny:", "failure_mode_denny:", bootstrap},
		{"rate limit action", "envoy/envoy.yaml", "- remote_address: {}", "- remote_adress: {}", bootstrap},
		{"enum value", "envoy/envoy.yaml", "DRAFT_VERSION_03", "DRAFT_VERSION_3", bootstrap},
		{"typed_config type", "envoy/envoy.yaml", "upstreams.http.v3.HttpProtocolOptions\n", "upstreams.http.v3.HttpProtocolOption\n", bootstrap},
		{"port over 65535 (validation)", "envoy/envoy.yaml", "port_value: 8081}", "port_value: 80810}", bootstrap},
		{"empty cluster name inside a typed_config (validation)", "envoy/envoy.yaml", "envoy_grpc: {cluster_name: shardlimit_router}", `envoy_grpc: {cluster_name: ""}`, bootstrap},
		{"duplicate key", "envoy/envoy.yaml", "stat_prefix: ingress\n", "stat_prefix: ingress\n                stat_prefix: again\n", bootstrap},
		{"TLS field", "envoy/envoy-tls.yaml", "certificate_chain:", "certificate_chains:", bootstrap},
		{"TLS enum value", "envoy/envoy-tls.yaml", "san_type: DNS", "san_type: DNZ", bootstrap},
		{"EnvoyFilter field", envoyFilterFile, "applyTo: CLUSTER", "apply_to: CLUSTER", envoyFilter},
		{"EnvoyFilter match field", envoyFilterFile, "subFilter:", "sub_filter:", envoyFilter},
		{"EnvoyFilter operation", envoyFilterFile, "operation: MERGE", "operation: MERGED", envoyFilter},
		{"field of a VIRTUAL_HOST patch", envoyFilterFile, "descriptor_key: route", "descriptor_kye: route", envoyFilter},
		{"enum of a CLUSTER patch", envoyFilterFile, "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBN", envoyFilter},
		{"value inside an HTTP_FILTER patch's typed_config", envoyFilterFile, "failure_mode_deny: false", "failure_mode_deny: nope", envoyFilter},
		{"Compose field", composeFile, "depends_on:", "depend_on:", composeDoc},
		{"Compose field merged from an anchor", composeFile, "  restart: on-failure\n", "  restarts: on-failure\n", composeDoc},
		{"Compose restart policy", composeFile, "restart: on-failure:30", "restart: on-failure:often", composeDoc},
		{"Compose port", composeFile, "- 127.0.0.1:8081:8081", "- 127.0.0.1:8081", composeDoc},
		{"rules field", envoyRulesFile, "descriptor:", "descriptors:", rulesDoc},
	} {
		doc := string(readExample(t, tc.file))
		if err := tc.load([]byte(doc)); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if !strings.Contains(doc, tc.old) {
			t.Errorf("%s: %s: %q is not in the file: update the case", tc.file, tc.why, tc.old)
			continue
		}
		err := tc.load([]byte(strings.ReplaceAll(doc, tc.old, tc.new)))
		if err == nil {
			t.Errorf("%s: %s: %q → %q loads", tc.file, tc.why, tc.old, tc.new)
			continue
		}
		t.Logf("%s: %s: %v", tc.file, tc.why, firstLine(err.Error()))
	}
}

// A flag the binary lacks in a Compose command line is reported.
func TestComposeRejectsUnknownFlag(t *testing.T) {
	doc := strings.Replace(string(readExample(t, composeFile)), "--lease-ttl=5s", "--lease-tll=5s", 1)
	c, err := loadCompose([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var invs []invocation
	for name, s := range c.Services {
		if isShardlimitImage(s.Image) {
			invs = append(invs, invocation{name, s.Command})
		}
	}
	errs := flagErrors(shardlimitBinary(t), invs, strings.NewReplacer())
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "--lease-tll is not a flag of `shardlimit shard`") {
		t.Fatalf("flag errors %v, want one naming --lease-tll", errs)
	}
}

// Every file of the examples is one that a test above checks.
func TestNoUncheckedExamples(t *testing.T) {
	checked := []string{"envoy/envoy.yaml", "envoy/envoy-tls.yaml", envoyRulesFile, composeFile, composeTLS,
		envoyFilterFile, gatewayPatchFile, envoyGrantsFile}
	for _, dir := range []string{"envoy", "istio"} {
		files, err := filepath.Glob(dir + "/*")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f == filepath.Join(composeDir, certsDir) {
				continue // gen-certs.sh's output for compose.tls.yaml, not in git
			}
			if !slices.Contains(checked, filepath.ToSlash(f)) {
				t.Errorf("%s is checked by no test: add it to one", f)
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
