package envoyconfig

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the testdata/*.golden files")

// Each file of testdata converts, alone, to its .golden: the rules file
// (which rules.Parse accepts) and the notes, or the error.
func TestConvertGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	readme, _ := filepath.Glob("testdata/readme/*.yaml")
	files = append(files, readme...)
	if len(files) < 10 {
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
