package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// This file checks the PromQL of deploy/: the alert rules, the dashboard's
// queries and the runbook's query blocks name only metrics of Metrics, and,
// when promtool is at hand, parse and pass their unit tests.

// metricNames returns the metric names an expression selects, in order of
// appearance. It is a lexer, not a parser: it skips strings, label matchers
// ({...}), ranges and subqueries ([...]), numbers and durations, Grafana
// variables ($x, ${x}), keywords, and identifiers followed by "(" (functions
// and aggregations) or after by/without/on/ignoring/group_left/group_right
// (label lists). promtool checks the syntax itself.
func metricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	i := 0
	next := func(j int) byte { // first non-space byte at or after j
		for ; j < len(s); j++ {
			if c := s[j]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return c
			}
		}
		return 0
	}
	skipString := func(j int) (int, error) { // s[j] is the opening quote
		q := s[j]
		for k := j + 1; k < len(s); k++ {
			switch {
			case s[k] == '\\' && q != '`':
				k++
			case s[k] == q:
				return k + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", j, expr)
	}
	skipGroup := func(j int, open, close byte) (int, error) { // s[j] == open
		depth := 0
		for k := j; k < len(s); k++ {
			switch c := s[k]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(k)
				if err != nil {
					return 0, err
				}
				k = end - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return k + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c at %d in %q", open, j, expr)
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	labelListKeywords := []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	keywords := []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
		"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := skipGroup(i, '{', '}')
			if err != nil {
				return nil, err
			}
			if strings.Contains(s[i:end], "__name__") {
				return nil, fmt.Errorf("a __name__ matcher hides the metric name: %q", expr)
			}
			i = end
		case c == '[':
			end, err := skipGroup(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i++
			if i < len(s) && s[i] == '{' {
				end, err := skipGroup(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			i = j
			switch lower := strings.ToLower(word); {
			case slices.Contains(labelListKeywords, lower):
				if next(i) == '(' {
					k := strings.IndexByte(s[i:], '(') + i
					end, err := skipGroup(k, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				}
			case slices.Contains(keywords, lower), next(i) == '(':
				// an operator, or a function or aggregation call
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	return names, nil
}

func TestMetricNamesLexer(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum by (job, le) (rate(a_bucket{x="b{c}",y=~"$ns"}[$__rate_interval]))`, []string{"a_bucket"}},
		{`a / on (namespace, job) group_left () avg by (namespace, job) (b) > 1.5 and on (job) c >= 60`, []string{"a", "b", "c"}},
		{`time() - max(x) > 3 * max without (instance) (y) offset 5m`, []string{"x", "y"}},
		{`max_over_time(max(m)[1h:1m]) # a comment naming not_a_metric`, []string{"m"}},
		{`topk(10, p{instance="<instance>"}) or vector(0)`, []string{"p"}},
		{`sum(rate(a[5m])) by (job) unless b == bool 1e3`, []string{"a", "b"}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket[${__rate_interval}])))`, []string{"h_bucket"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	if _, err := metricNames(`{__name__=~"shardlimit_.*"}`); err == nil {
		t.Error("a __name__ matcher passed")
	}
}

// knownMetric reports whether a query may name the series name.
func knownMetric(name string) bool {
	if name == "up" || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
		return true
	}
	if slices.Contains(Metrics, name) {
		return true
	}
	for _, h := range Histograms {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if name == h+suffix {
				return true
			}
		}
	}
	return false
}

func TestMetricsList(t *testing.T) {
	seen := map[string]bool{}
	// shardlimit_build_info is every component's, as in Prometheus' own
	// prometheus_build_info.
	valid := regexp.MustCompile(`^shardlimit_((router|shard|rebalance)_[a-z0-9_]+|build_info)$`)
	for _, m := range Metrics {
		if seen[m] {
			t.Errorf("%s is listed twice", m)
		}
		seen[m] = true
		if !valid.MatchString(m) {
			t.Errorf("%s is not named shardlimit_<component>_<what>", m)
		}
	}
	for _, h := range Histograms {
		if !seen[h] {
			t.Errorf("histogram %s is not in Metrics", h)
		}
	}
}

// query is one PromQL expression of deploy/ and where it comes from.
type query struct{ where, expr string }

func alertQueries(t *testing.T) []query {
	var qs []query
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{"prometheus/alerts.yaml " + r.Alert + r.Record, r.Expr})
		}
	}
	return qs
}

// dashboardQueries returns the panels' queries, and the metric names of the
// template variables' label_values(metric, label) queries.
func dashboardQueries(t *testing.T) (qs []query, variableMetrics []query) {
	d := readDashboard(t)
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("grafana/shardlimit.json panel %d %q %s", p.ID, p.Title, tg.RefID), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("grafana variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		variableMetrics = append(variableMetrics, query{"grafana/shardlimit.json variable " + v.Name, m[1]})
	}
	return qs, variableMetrics
}

// runbookQueries returns each line of the runbook's ```promql blocks.
func runbookQueries(t *testing.T) []query {
	b, err := os.ReadFile("RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	var qs []query
	in := false
	for n, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```promql"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			if e := strings.TrimSpace(strings.SplitN(line, "#", 2)[0]); e != "" {
				qs = append(qs, query{fmt.Sprintf("RUNBOOK.md:%d", n+1), e})
			}
		}
	}
	if len(qs) == 0 {
		t.Fatal("RUNBOOK.md has no ```promql block")
	}
	return qs
}

// Every PromQL expression in deploy/ names only metrics of Metrics (plus
// up and the Go and process collectors'), so a renamed metric cannot
// silently empty a panel or disarm an alert.
func TestQueriesNameOnlyKnownMetrics(t *testing.T) {
	qs := alertQueries(t)
	dq, vq := dashboardQueries(t)
	qs = append(append(append(qs, dq...), vq...), runbookQueries(t)...)
	used := map[string]bool{}
	for _, q := range qs {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(names) == 0 && !strings.HasPrefix(q.expr, "vector(") {
			t.Errorf("%s: names no metric: %s", q.where, q.expr)
		}
		for _, n := range names {
			used[strings.TrimSuffix(n, "_bucket")] = true
			if !knownMetric(n) {
				t.Errorf("%s: %s is not a metric of deploy.Metrics: %s", q.where, n, q.expr)
			}
		}
	}
	// The dashboard shows every metric of the contract.
	dq = append(dq, vq...)
	onDashboard := map[string]bool{}
	for _, q := range dq {
		names, _ := metricNames(q.expr)
		for _, n := range names {
			onDashboard[strings.TrimSuffix(n, "_bucket")] = true
		}
	}
	for _, m := range Metrics {
		if !onDashboard[m] {
			t.Errorf("%s is on no dashboard panel", m)
		}
	}
}

// promtool returns the promtool to run: $PROMTOOL, the repository's
// .bin/promtool (`make promtool`), or one on PATH; it skips the test when
// there is none.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err != nil && !filepath.IsAbs(p) {
			p = filepath.Join("..", p) // relative to the repository root
		}
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", ".bin", "promtool")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	t.Skip("no promtool: run `make promtool` (installs .bin/promtool) or set PROMTOOL")
	return ""
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The alert rules parse, and their unit tests pass.
func TestAlertRulesPromtool(t *testing.T) {
	runPromtool(t, "check", "rules", filepath.Join("prometheus", "alerts.yaml"))
	runPromtool(t, "test", "rules", filepath.Join("prometheus", "alerts_test.yaml"))
}

// The dashboard's and the runbook's queries parse: promtool checks them as
// recording rules, Grafana's variables replaced by plain values.
func TestQueriesParse(t *testing.T) {
	bin := promtool(t)
	dq, _ := dashboardQueries(t)
	qs := append(dq, runbookQueries(t)...)
	vars := strings.NewReplacer("${__rate_interval}", "5m", "$__rate_interval", "5m", "$__interval", "1m",
		"$__range", "1h", "${namespace}", ".*", "$namespace", ".*")
	type recording struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	type group struct {
		Name  string      `json:"name"`
		Rules []recording `json:"rules"`
	}
	g := group{Name: "queries"}
	for i, q := range qs {
		g.Rules = append(g.Rules, recording{Record: fmt.Sprintf("query_%d", i), Expr: vars.Replace(q.expr)})
	}
	b, err := json.Marshal(map[string][]group{"groups": {g}}) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", f).CombinedOutput(); err != nil {
		for i, q := range qs {
			if strings.Contains(string(out), fmt.Sprintf("query_%d", i)) {
				t.Errorf("%s does not parse: %s", q.where, q.expr)
			}
		}
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
