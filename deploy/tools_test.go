package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The promtool versions pinned in Makefile.deploy agree with
// deploy/tools/go.mod, the source install-promtool.sh builds from.
func TestPromtoolPins(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "Makefile.deploy"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join("tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^PROMTOOL_GO_VERSION := (\S+)$`).FindSubmatch(mk)
	req := regexp.MustCompile(`(?m)^require github.com/prometheus/prometheus (\S+)$`).FindSubmatch(gomod)
	if pin == nil || req == nil {
		t.Fatalf("no PROMTOOL_GO_VERSION in Makefile.deploy (%q) or prometheus require in tools/go.mod (%q)", pin, req)
	}
	if string(pin[1]) != string(req[1]) {
		t.Errorf("Makefile.deploy pins promtool %s, deploy/tools/go.mod %s", pin[1], req[1])
	}
	if !regexp.MustCompile(`(?m)^PROMTOOL_DEB_VERSION := \d+\.\d+\.\d+\S*$`).Match(mk) {
		t.Error("Makefile.deploy pins no exact PROMTOOL_DEB_VERSION")
	}
}
