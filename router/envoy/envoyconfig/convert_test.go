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
