package envoyconfig

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardlimit/shardlimit/router/rules"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the testdata/*.golden files")

// Each file of testdata converts, alone, to its .golden: the rules file
// (which rules.Parse accepts) and the notes, or the error.
func TestConvertGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	readme, _ := filepath.Glob("testdata/readme/*.yaml")
	examples, _ := filepath.Glob("testdata/envoy-examples/*.yaml")
	files = append(append(files, readme...), examples...)
	if len(files) < 13 {
		t.Fatalf("%d fixtures", len(files))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			got := convertText(t, f)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *rewrite {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -rewrite)", err)
			}
			if got != string(want) {
				t.Errorf("%s changed (go test -rewrite to accept):\n%s", golden, got)
			}
		})
	}
}

func convertText(t *testing.T, file string) string {
	t.Helper()
	res, err := Load([]string{file}, Options{})
	if err != nil {
		return "error:\n" + err.Error() + "\n"
	}
	if _, err := res.Parsed(); err != nil {
		t.Fatalf("the converted rules do not parse: %v", err)
	}
	b, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var notes strings.Builder
	for _, n := range res.Notes {
		notes.WriteString("# " + n.String() + "\n")
	}
	return string(b) + "---notes---\n" + notes.String()
}

// Files of one domain merge, as envoy ratelimit's MERGE_DOMAIN_CONFIG
// does; a descriptor repeated across them, or a domain that cannot be a
// service, converts nothing.
func TestConvertMerges(t *testing.T) {
	parse := func(name, doc string) *Config {
		t.Helper()
		c, err := Parse(name, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := parse("a.yaml", "domain: d\ndescriptors:\n  - key: x\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	b := parse("b.yaml", "domain: d\ndescriptors:\n  - key: y\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	res, err := Convert([]*Config{a, b}, Options{})
	if err != nil || len(res.Rules) != 2 || res.Origins[1].File != "b.yaml" {
		t.Fatalf("%v %+v", err, res)
	}
	again := parse("c.yaml", "domain: d\ndescriptors:\n  - key: x\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
	if _, err := Convert([]*Config{a, again}, Options{}); err == nil || !strings.Contains(err.Error(), "c.yaml:3: invalid envoy ratelimit config: domain \"d\": descriptor x is also at a.yaml:3") {
		t.Fatalf("repeated descriptor: %v", err)
	}
	slash := parse("s.yaml", "domain: a/b\ndescriptors: []\n")
	if _, err := Convert([]*Config{slash}, Options{}); err == nil || !strings.Contains(err.Error(), `s.yaml:1: domain "a/b" cannot be a shardlimit service`) {
		t.Fatalf("bad domain: %v", err)
	}
}

// envoy ratelimit's own example directory converts, file by file and as a
// whole, without an error, into rules that parse; what the rules cannot
// express (quota_mode) is a lossy note naming its line, which --strict
// refuses.
func TestConvertEnvoyExamples(t *testing.T) {
	files, _ := filepath.Glob("testdata/envoy-examples/*.yaml")
	if len(files) != 3 {
		t.Fatalf("%d example files, want example.yaml, config.yaml and quota.yaml", len(files))
	}
	for _, set := range append([][]string{files}, [][]string{{files[0]}, {files[1]}, {files[2]}}...) {
		res, err := Load(set, Options{})
		if err != nil {
			t.Fatalf("%v: %v", set, err)
		}
		if _, err := res.Parsed(); err != nil {
			t.Fatalf("%v: the converted rules do not parse: %v", set, err)
		}
	}
	res, _ := Load([]string{"testdata/envoy-examples/quota.yaml"}, Options{})
	var lossy []string
	for _, n := range res.Notes {
		if n.Lossy {
			lossy = append(lossy, n.String())
		}
	}
	want := []string{
		"testdata/envoy-examples/quota.yaml:5: cannot express: quota_mode: converted as shadow: answers over the limit stay OK and are counted, but Envoy's response does not list the descriptor in its dynamic metadata as quota mode does",
		"testdata/envoy-examples/quota.yaml:11: cannot express: quota_mode: converted as shadow: answers over the limit stay OK and are counted, but Envoy's response does not list the descriptor in its dynamic metadata as quota mode does",
	}
	if strings.Join(lossy, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lossy notes:\n%s\nwant:\n%s", strings.Join(lossy, "\n"), strings.Join(want, "\n"))
	}
	for _, r := range res.Rules {
		if !r.Shadow {
			t.Errorf("rule %s: quota_mode converts to shadow", rules.FormatDescriptor(r.Descriptor))
		}
	}
}

// The keys of envoy ratelimit that the rules cannot express are noted,
// not refused; share_threshold without a wildcard is refused, as envoy
// ratelimit refuses it.
func TestInexpressibleKeysAreNotes(t *testing.T) {
	c, err := Parse("k.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    value: 'p*'\n    share_threshold: true\n    value_to_metric: true\n    descriptors:\n      - key: b\n        quota_mode: true\n        rate_limit: {unit: second, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert([]*Config{c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range res.Notes {
		got = append(got, fmt.Sprintf("%d %t %s", n.Line, n.Lossy, strings.SplitN(n.Message, ":", 2)[0]))
	}
	if want := "3 true value_to_metric|3 true share_threshold|8 true quota_mode"; strings.Join(got, "|") != want {
		t.Fatalf("notes %q, want %q", strings.Join(got, "|"), want)
	}
	if _, err := Parse("k.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    value: p\n    share_threshold: true\n")); err == nil || !strings.Contains(err.Error(), "k.yaml:3: invalid envoy ratelimit config: share_threshold: only for a wildcard value (ending in '*'), not a=p") {
		t.Fatalf("share_threshold without a wildcard: %v", err)
	}
}
