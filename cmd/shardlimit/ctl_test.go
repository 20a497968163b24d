package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/shardlimit/shardlimit/deploy"
	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// JSON and YAML print a stable view: proto field names, every field, 64-bit
// integers as numbers, enums by name, durations as Go durations, sorted
// keys, fixed indentation.
func TestStableOutput(t *testing.T) {
	resp := &shardlimitv1.ListMembersResponse{Partitions: 1024, Members: []*shardlimitv1.Member{{
		Id: "shard-1", Version: "v1.0.0", StartedUnixNs: 1795457985482718277, Partitions: 7, Error: "down",
	}}}
	want := map[string]string{
		"json": `{
  "members": [
    {
      "addr": "",
      "error": "down",
      "id": "shard-1",
      "partitions": 7,
      "ready_unix_ns": 0,
      "started_unix_ns": 1795457985482718277,
      "stats": null,
      "version": "v1.0.0",
      "zone": ""
    }
  ],
  "partitions": 1024
}
`,
		"yaml": `members:
  - addr: ""
    error: down
    id: shard-1
    partitions: 7
    ready_unix_ns: 0
    started_unix_ns: 1795457985482718277
    stats: null
    version: v1.0.0
    zone: ""
partitions: 1024
`,
	}
	for format, w := range want {
		var b bytes.Buffer
		if err := printOutput(&b, format, resp, nil); err != nil {
			t.Fatal(err)
		}
		if b.String() != w {
			t.Errorf("-o %s:\n%s\nwant:\n%s", format, b.String(), w)
		}
	}

	changes := &shardlimitv1.ApplyRulesResponse{Changes: []*shardlimitv1.RuleChange{{Op: shardlimitv1.RuleChange_OP_ADD, Service: "s"}}, Revision: 1 << 40}
	d := &shardlimitv1.Decision{Allowed: true, RetryAfter: durationpb.New(1500 * time.Millisecond)}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{changes, `"op": "OP_ADD"`},
		{changes, `"revision": 1099511627776`},
		{map[string]any{"hits": int64(1)<<53 + 1, "decision": d}, `"hits": 9007199254740993`}, // no float64 on the way
		{map[string]any{"hits": int64(1), "decision": d}, `"retry_after": "1.5s"`},
		{buildInfo{Version: "v1", GoVersion: "go1.26"}, `"go_version": "go1.26"`},
	} {
		var b bytes.Buffer
		if err := printOutput(&b, "json", tc.v, nil); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%T: %s lacks %s", tc.v, b.String(), tc.want)
		}
	}
}

// ctl reads each global flag from SHARDLIMIT_<FLAG>, and a flag on the
// command line overrides it.
func TestCtlEnvironment(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.yaml")
	if err := os.WriteFile(file, deploy.SampleRules, 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) (string, error) {
		cmd := ctlCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	t.Setenv("SHARDLIMIT_OUTPUT", "yaml")
	sample, err := rules.Parse("sample.yaml", deploy.SampleRules)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := ctl("rules", "validate", "-f", file); err != nil || out != fmt.Sprintf("files: 1\nrules: %d\nvalid: true\n", len(sample)) {
		t.Errorf("SHARDLIMIT_OUTPUT=yaml: %q, %v", out, err)
	}
	if out, err := ctl("rules", "validate", "-f", file, "-o", "text"); err != nil || !strings.HasSuffix(out, "are valid\n") {
		t.Errorf("-o text over SHARDLIMIT_OUTPUT=yaml: %q, %v", out, err)
	}
	t.Setenv("SHARDLIMIT_OUTPUT", "xml")
	if _, err := ctl("rules", "validate", "-f", file); exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), "--output") {
		t.Errorf("SHARDLIMIT_OUTPUT=xml: %v (exit %d)", err, exitCode(err))
	}
	t.Setenv("SHARDLIMIT_OUTPUT", "")
	t.Setenv("SHARDLIMIT_TIMEOUT", "soon")
	if _, err := ctl("rules", "validate", "-f", file); exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), `invalid value "soon" for SHARDLIMIT_TIMEOUT (environment; --timeout)`) {
		t.Errorf("SHARDLIMIT_TIMEOUT=soon: %v (exit %d)", err, exitCode(err))
	}
	t.Setenv("SHARDLIMIT_TIMEOUT", "")
	t.Setenv("SHARDLIMIT_ROUTER", "no-port")
	if _, err := ctl("members"); exitCode(err) != exitUsage || !strings.Contains(fmt.Sprint(err), "--router/SHARDLIMIT_ROUTER no-port (from SHARDLIMIT_ROUTER)") {
		t.Errorf("SHARDLIMIT_ROUTER=no-port: %v (exit %d)", err, exitCode(err))
	}
	help, _ := ctl("--help")
	for _, want := range []string{"SHARDLIMIT_ROUTER", "SHARDLIMIT_TLS_CA", "SHARDLIMIT_TLS_CERT", "SHARDLIMIT_TLS_KEY", "[$SHARDLIMIT_ROUTER]", "Exit codes:", "3  ctl check: denied"} {
		if !strings.Contains(help, want) {
			t.Errorf("ctl --help lacks %q", want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{withCode(exitChanges, nil), exitChanges},
		{fmt.Errorf("wrapped: %w", withCode(exitDenied, nil)), exitDenied},
		{usageErrorf("--x: bad"), exitUsage},
		{errors.New("invalid rules"), exitFailed},
		{status.Error(codes.InvalidArgument, "limit"), exitFailed},
		{status.Error(codes.Unavailable, "down"), exitUnavailable},
		{status.Error(codes.PermissionDenied, "no"), exitRefused},
		{status.Error(codes.Unauthenticated, "who"), exitRefused},
		{status.Error(codes.DeadlineExceeded, "late"), exitTimeout},
		{context.DeadlineExceeded, exitTimeout},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if msg := errorMessage(withCode(exitDenied, nil)); msg != "" {
		t.Errorf("a bare exit code prints %q", msg)
	}
	seen := map[int]bool{}
	for _, c := range exitCodes {
		if seen[c.code] || c.meaning == "" {
			t.Errorf("exit code %d documented twice or without meaning", c.code)
		}
		seen[c.code] = true
	}
	if len(seen) != exitTimeout+1 {
		t.Errorf("%d exit codes documented, want %d", len(seen), exitTimeout+1)
	}
}

// A JSON rules file reads as JSON does, even where YAML's double-quoted
// strings differ from JSON's (\/ and surrogate pairs), and its errors keep
// their lines; YAML passes unchanged.
func TestRulesFileInJSON(t *testing.T) {
	doc := "{\"rules\": [\n\t{\"service\": \"shop\", \"endpoint\": \"\\/checkout\",\n\t \"name\": \"emoji-\\ud83d\\ude00-\\u2028-\\\\/\",\n\t \"limit\": 3, \"period\": \"1m\"}\n]}\n"
	if _, err := rules.Parse("r.json", []byte(doc)); err == nil {
		t.Log("the YAML parser now reads \\/ and surrogate pairs; yamlSafeJSON may go")
	}
	rs, err := rules.Parse("r.json", yamlSafeJSON([]byte(doc)))
	if err != nil || len(rs) != 1 || rs[0].Endpoint != "/checkout" || rs[0].Name != "emoji-\U0001F600-\u2028-\\/" || rs[0].Limit != 3 {
		t.Fatalf("got %+v, %v", rs, err)
	}
	bad := strings.Replace(doc, `"limit": 3`, `"limit": 0`, 1)
	if _, err := rules.Parse("r.json", yamlSafeJSON([]byte(bad))); err == nil || !strings.HasPrefix(err.Error(), "r.json:4: invalid rule: limit:") {
		t.Errorf("got %v, want the limit's error at line 4", err)
	}
	y := []byte("rules:\n  - {service: shop, endpoint: '\\/x', limit: 1, period: 1m}\n")
	if got := yamlSafeJSON(y); !bytes.Equal(got, y) {
		t.Errorf("YAML changed: %q", got)
	}
}

// `ctl rules validate` checks the routers' default bounds on the number of
// rules, naming the service and the flag.
func TestRulesValidateBounds(t *testing.T) {
	bin := buildBinary(t)
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range rules.DefaultBounds().PerService + 1 {
		fmt.Fprintf(&b, "  - {service: shop, endpoint: /e%d, limit: 1, period: 1m}\n", i)
	}
	path := filepath.Join(t.TempDir(), "many.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, bin, "", nil, "ctl", "rules", "validate", "-f", path)
	if r.code != exitFailed || !strings.Contains(r.stderr, `service "shop" would have 101 rules, over the maximum of 100 per service (--max-rules-per-service)`) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A mistyped command of any group of the real binary exits 2 and names
// the closest command, as the README promises; a group alone prints its
// help and exits 0.
func TestMistypedCommandExitsUsage(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ctl", "chek"}, `shardlimit: unknown command "chek" for "shardlimit ctl"; did you mean "check"?` + "\nRun 'shardlimit ctl --help' for usage.\n"},
		{[]string{"ctl", "rules", "gte"}, `shardlimit: unknown command "gte" for "shardlimit ctl rules"; did you mean "get"?` + "\nRun 'shardlimit ctl rules --help' for usage.\n"},
		{[]string{"ctl", "grants", "lst"}, `shardlimit: unknown command "lst" for "shardlimit ctl grants"; did you mean "list"?` + "\nRun 'shardlimit ctl grants --help' for usage.\n"},
		{[]string{"ctll"}, `shardlimit: unknown command "ctll" for "shardlimit"; did you mean "ctl"?` + "\nRun 'shardlimit --help' for usage.\n"},
	} {
		r := run(t, bin, "", nil, tc.args...)
		if r.code != exitUsage || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s\nwant exit %d and %s", tc.args, r.code, r.stdout, r.stderr, exitUsage, tc.want)
		}
	}
	if r := run(t, bin, "", nil, "ctl", "rules"); r.code != exitOK || !strings.Contains(r.stdout, "Available Commands:") {
		t.Errorf("ctl rules: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// ctl counts in words that agree with the number.
func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{plural(0, "rule"), "0 rules"},
		{plural(1, "rule"), "1 rule"},
		{plural(uint64(4), "rule"), "4 rules"},
		{plural(int64(1), "old → new owner pair"), "1 old → new owner pair"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
	dir := t.TempDir()
	one := filepath.Join(dir, "one.yaml")
	if err := os.WriteFile(one, []byte("rules:\n  - {service: shop, endpoint: /e, limit: 1, period: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCtl("rules", "validate", "-f", one); err != nil || out != "1 rule in 1 file is valid\n" {
		t.Errorf("one rule: %q, %v", out, err)
	}
	if out, _, err := runCtl("rules", "validate", "-f", one, "-f", one); err != nil || out != "2 rules in 2 files are valid\n" {
		t.Errorf("two files: %q, %v", out, err)
	}
	var b bytes.Buffer
	if err := printChanges(&b, "text", &shardlimitv1.ApplyRulesResponse{Changes: []*shardlimitv1.RuleChange{{Op: shardlimitv1.RuleChange_OP_ADD, Service: "shop", Name: "n", After: "limit: 1\n"}}}); err != nil || !strings.HasSuffix(b.String(), "would change 1 rule\n") {
		t.Errorf("one change: %q, %v", b.String(), err)
	}
}

// -o json and -o yaml summarise each shard's partition loads: how many
// partitions had load, and the hottest few, hottest first (lower
// partition first on a tie); --partitions prints them all.
func TestMembersView(t *testing.T) {
	loads := make([]uint64, 1024)
	for p, l := range map[int]uint64{3: 7, 9: 40, 17: 40, 200: 1, 500: 2, 1000: 3} {
		loads[p] = l
	}
	resp := &shardlimitv1.ListMembersResponse{Partitions: 1024, Members: []*shardlimitv1.Member{
		{Id: "shard-1", Partitions: 512, Stats: &shardlimitv1.StatsResponse{PartitionLoad: loads, Load: 93}},
		{Id: "shard-2", Error: "down"},
	}}
	var b bytes.Buffer
	if err := printOutput(&b, "json", membersView(resp, false), nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"partitions_loaded": 6`,
		`"partition_load_top": [
          {
            "load": 40,
            "partition": 9
          },
          {
            "load": 40,
            "partition": 17
          },
          {
            "load": 7,
            "partition": 3
          },
          {
            "load": 3,
            "partition": 1000
          },
          {
            "load": 2,
            "partition": 500
          }
        ]`,
		`"stats": null`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %s:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "partition_load\"") {
		t.Errorf("summary holds the partition loads:\n%s", b.String())
	}
	b.Reset()
	if err := printOutput(&b, "yaml", membersView(resp, true), nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n < 1024 || strings.Contains(b.String(), "partition_load_top") {
		t.Errorf("--partitions: %d lines, want every partition's load and no summary", n)
	}
	if _, _, err := runCtl("members", "--partitions"); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--partitions: only with -o json or -o yaml") {
		t.Errorf("--partitions with -o text: %v", err)
	}
}

// ctlCluster starts a cluster with the rules of doc over an etcd of its
// own, for ctl to talk to.
func ctlCluster(t *testing.T, doc string, o clustertest.Options) *clustertest.Cluster {
	t.Helper()
	e, err := embedded.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if o.Rules, err = rules.Parse("test.yaml", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return clustertest.New(t, e.Endpoint(), o)
}

// operatorFlags are ctl's flags to call c's first router as the operator,
// with a timeout above the cluster routers' 5 s deadline (ctl's default
// is 5 s): a loaded machine must not turn a slow answer into exit 7.
func operatorFlags(c *clustertest.Cluster) []string {
	op := c.PKI.Operator
	return []string{"--router", c.Routers[0].Addr(), "--tls-ca", op.CA, "--tls-cert", op.Cert, "--tls-key", op.Key, "--timeout", "30s"}
}
