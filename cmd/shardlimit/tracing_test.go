package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// `shardlimit dev --otlp-endpoint` with no collector stops on SIGINT as
// fast as without tracing (it took 24-40s: each component's tracing retried
// its flush), and each component says in its structured log how many spans
// it dropped; nothing goes to OpenTelemetry's default stderr logger
// ("2026/01/02 15:04:05 traces export: ...").
func TestDevStopsWithoutCollector(t *testing.T) {
	bin := buildBinary(t)
	d := startDev(t, bin, "--otlp-endpoint", freeAddr(t), "--otlp-insecure")
	env := []string{"SHARDLIMIT_CONFIG=" + d.config, "SHARDLIMIT_ROUTER=" + d.router}
	if r := run(t, bin, "", env, "ctl", "check", "--service", "shop", "--endpoint", "/checkout", "--user", "alice"); r.code != 0 {
		t.Fatalf("ctl check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	start := time.Now()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	guard := time.After(60 * time.Second) // a hang guard, not the bound: dev's children get 10s each
	for open := true; open; {
		select {
		case l, ok := <-d.lines:
			out.WriteString(l + "\n")
			open = ok
		case <-guard:
			t.Fatalf("dev did not stop within 60s of SIGINT:\n%s", out.String())
		}
	}
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("dev exited with %v after SIGINT:\n%s", err, out.String())
	}
	t.Logf("dev stopped in %v", time.Since(start).Round(time.Millisecond))
	got := out.String()
	dropped := false
	for _, l := range strings.Split(got, "\n") {
		dropped = dropped || strings.HasPrefix(l, "router   | ") && strings.Contains(l, `level=WARN msg="tracing stopped: spans not exported were dropped"`)
		if strings.Contains(l, "did not stop in 10s") || (strings.Contains(l, "traces export") && !strings.Contains(l, "level=")) {
			t.Errorf("line %q, want every component stopped in time and OpenTelemetry's errors in the structured log:\n%s", l, got)
		}
	}
	if !dropped {
		t.Errorf("the router did not log the spans it dropped:\n%s", got)
	}
}
