package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shardlimit/shardlimit/router/rules"
)

// Every rules file shipped in deploy/rules parses and validates.
func TestShippedRulesAreValid(t *testing.T) {
	files, err := filepath.Glob("rules/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rules files: %v", err)
	}
	files = append(files, envoyRulesFile)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := rules.Parse(f, b)
		if err != nil {
			t.Error(err)
		} else if len(rs) == 0 {
			t.Errorf("%s holds no rules", f)
		}
	}
}
