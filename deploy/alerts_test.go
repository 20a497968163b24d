package deploy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite generated files (k8s/base/prometheusrule.yaml) instead of comparing")

// ruleFile is a Prometheus rule file, and the spec of a PrometheusRule.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

type rule struct {
	Alert         string            `json:"alert,omitempty"`
	Record        string            `json:"record,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule
// that deploy/ uses; parsed strictly, an unknown field fails.
type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            ruleFile          `json:"spec"`
}

// promtoolTests is the part of a `promtool test rules` file this test reads.
type promtoolTests struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	Tests              []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		InputSeries []struct {
			Series string `json:"series"`
			Values string `json:"values"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readStrict(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readAlerts(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	readStrict(t, filepath.Join("prometheus", "alerts.yaml"), &f)
	return f
}

// The alerts the brief of deploy/ asks for; more may be added.
var requiredAlerts = []string{
	"ShardlimitHotShard", "ShardlimitHostSetupSlow", "ShardlimitShardDown", "ShardlimitFailOpenRateHigh",
	"ShardlimitRebalanceStale", "ShardlimitRouterNoShards", "ShardlimitInvalidRules", "ShardlimitEtcdUnreachable",
	"ShardlimitRoutersDown", "ShardlimitRouterOverloaded", "ShardlimitCheckLatencyHigh", "ShardlimitCertificateExpiring",
}

const runbookURL = "https://github.com/shardlimit/shardlimit/blob/main/deploy/RUNBOOK.md#"

// runbookAnchors returns the GitHub anchors of RUNBOOK.md's headings.
func runbookAnchors(t *testing.T) map[string]bool {
	b, err := os.ReadFile("RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			a := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "")
			anchors[strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	return anchors
}

// Every alert has a known severity, a summary, a description and a runbook
// section; every alert has a test where it fires and one where it must not.
func TestAlertsAreDocumentedAndTested(t *testing.T) {
	anchors := runbookAnchors(t)
	var tests promtoolTests
	readStrict(t, filepath.Join("prometheus", "alerts_test.yaml"), &tests)
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yaml"}) {
		t.Errorf("alerts_test.yaml tests %v, want [alerts.yaml]", tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}

	seen := map[string]bool{}
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if seen[r.Alert] {
				t.Errorf("%s: defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: severity %q is not critical, warning or info (the monitoring-mixins convention)", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if got, want := r.Annotations["runbook_url"], runbookURL+strings.ToLower(r.Alert); got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: RUNBOOK.md has no section \"## %s\"", r.Alert, r.Alert)
			}
			if !fires[r.Alert] {
				t.Errorf("%s: alerts_test.yaml has no test where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yaml has no test where it must not fire", r.Alert)
			}
		}
	}
	for _, a := range requiredAlerts {
		if !seen[a] {
			t.Errorf("alert %s is missing", a)
		}
	}
}

// prometheusRuleYAML renders k8s/base/prometheusrule.yaml from alerts.yaml:
// the groups under spec:, comments kept.
func prometheusRuleYAML(alerts []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# Code generated from deploy/prometheus/alerts.yaml by\n" +
		"# `go test ./deploy -run TestPrometheusRule -update`. DO NOT EDIT.\n" +
		"apiVersion: monitoring.coreos.com/v1\n" +
		"kind: PrometheusRule\n" +
		"metadata:\n" +
		"  name: shardlimit\n" +
		"  labels:\n" +
		"    app.kubernetes.io/name: shardlimit\n" +
		"    app.kubernetes.io/component: alerts\n" +
		"spec:\n")
	lines := strings.Split(strings.TrimRight(string(alerts), "\n"), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "groups:") })
	for _, l := range lines[max(start, 0):] {
		if l != "" {
			b.WriteString("  ")
		}
		b.WriteString(l + "\n")
	}
	return b.Bytes()
}

// k8s/base/prometheusrule.yaml is alerts.yaml wrapped in a PrometheusRule:
// byte for byte as generated, and the same rules when both are parsed.
func TestPrometheusRule(t *testing.T) {
	alerts, err := os.ReadFile(filepath.Join("prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("k8s", "base", "prometheusrule.yaml")
	want := prometheusRuleYAML(alerts)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from prometheus/alerts.yaml: run `go test ./deploy -run TestPrometheusRule -update`", path)
	}
	var pr prometheusRule
	readStrict(t, path, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: %s %s, want monitoring.coreos.com/v1 PrometheusRule", path, pr.APIVersion, pr.Kind)
	}
	if a := readAlerts(t); !reflect.DeepEqual(pr.Spec, a) {
		t.Errorf("%s: spec does not equal prometheus/alerts.yaml", path)
	}
}
