package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The promtool versions pinned in deploy/deploy.mk agree with
// deploy/tools/go.mod, the source install-promtool.sh builds from.
func TestPromtoolPins(t *testing.T) {
	mk, err := os.ReadFile("deploy.mk")
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
		t.Fatalf("no PROMTOOL_GO_VERSION in deploy/deploy.mk (%q) or prometheus require in tools/go.mod (%q)", pin, req)
	}
	if string(pin[1]) != string(req[1]) {
		t.Errorf("deploy/deploy.mk pins promtool %s, deploy/tools/go.mod %s", pin[1], req[1])
	}
	if !regexp.MustCompile(`(?m)^PROMTOOL_DEB_VERSION := \d+\.\d+\.\d+\S*$`).Match(mk) {
		t.Error("deploy/deploy.mk pins no exact PROMTOOL_DEB_VERSION")
	}
}
