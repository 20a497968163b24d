package envoyconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzConvert feeds arbitrary documents to Parse and Convert: they never
// panic, and whatever converts is a rules file that rules.Parse accepts,
// with one origin per rule.
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("testdata/readme/*.yaml")
	examples, _ := filepath.Glob("testdata/envoy-examples/*.yaml")
	files = append(append(files, examples...), "testdata/greedy.yaml", "testdata/invalid.yaml", "testdata/star.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: '*'\n    descriptors:\n      - key: b\n        value: 'x*'\n        rate_limit: {unit: week, requests_per_unit: 0}\n  - key: a\n    rate_limit: {unlimited: true, name: n, replaces: [{name: m}]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("fuzz.yaml", b)
		if err != nil {
			return
		}
		res, err := Convert([]*Config{c}, Options{})
		if err != nil {
			return
		}
		if len(res.Origins) != len(res.Rules) {
			t.Fatalf("%d origins for %d rules", len(res.Origins), len(res.Rules))
		}
		if _, err := res.Parsed(); err != nil {
			t.Fatalf("converted rules do not parse: %v\n%s", err, b)
		}
	})
}

// Names that no rule could have are made to fit, in names and replaces
// alike.
func TestNamesFit(t *testing.T) {
	long := strings.Repeat("n", 200)
	c, err := Parse("n.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: \""+long+"\"}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, name: \"x\\ny\", replaces: [{name: \""+long+"\"}]}\n  - key: c\n    rate_limit: {unit: second, requests_per_unit: 1, name: '*'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert([]*Config{c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := res.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Name != rs[1].Replaces[0] || len(rs[0].Name) > 128 || rs[1].Name != "x_y" || rs[2].Name != "_*" {
		t.Fatalf("names %q %q %q replaces %q", rs[0].Name, rs[1].Name, rs[2].Name, rs[1].Replaces)
	}
}
