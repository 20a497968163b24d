package main

import (
	"os"
	"strings"
	"testing"
)

// TestMain runs the tests without the SHARDLIMIT_ variables of the shell
// that started them: ctl and the servers read them (a dev cluster's
// SHARDLIMIT_CONFIG, say), and a test that wants one sets it itself.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix) {
			_ = os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}
