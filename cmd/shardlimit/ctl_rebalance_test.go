package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// `ctl rebalance apply --wait` whose --timeout passes while the run
// settles (a minute here) prints the phases so far and says that the run
// was in phase settle, what the copy before it moved, and that the run
// goes on at the leader; it exits 7.
func TestRebalanceWaitTimeoutSaysThePhase(t *testing.T) {
	e, err := embedded.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rs, err := rules.Parse("test.yaml", []byte("rules:\n  - {service: shop, endpoint: /checkout, name: checkout, limit: 100, period: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, e.Endpoint(), clustertest.Options{Shards: 2, Rules: rs, Rebalance: func(o *rebalance.Options) { o.Settle = time.Minute }})
	j := c.StartRebalance()
	poll.Until(t, 10*time.Second, func() error {
		if !j.Leading() {
			return errors.New("no leader yet")
		}
		return nil
	})
	// Load on one shard only, in partitions of their own: a run moves some.
	hot := c.Shards[0].ID()
	cl := c.Client(0)
	for i, n := 0, 0; n < 8; i++ {
		u := fmt.Sprintf("u%d", i)
		if c.Owner("shop", "checkout", u).ID != hot {
			continue
		}
		n++
		req := &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: u}}}
		if _, err := cl.Check(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	op := c.PKI.Operator
	cmd := ctlCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out bytes.Buffer
	cmd.SetOut(&out)
	// Generous: plan, copy and publish take milliseconds; settle a minute.
	flags := []string{"--router", c.Routers[0].Addr(), "--tls-ca", op.CA, "--tls-cert", op.Cert, "--tls-key", op.Key, "--tls-server-name", creds.LocalServerName}
	cmd.SetArgs(append(flags, "--timeout", "15s", "rebalance", "apply", "--wait"))
	err = cmd.ExecuteContext(context.Background())
	t.Logf("stdout:\n%s\nerror: %v", out.String(), err)
	if exitCode(err) != exitTimeout {
		t.Fatalf("exit %d, want %d", exitCode(err), exitTimeout)
	}
	for _, want := range []string{"no end within 15s (--timeout)", "was in phase settle", "done before: plan ended", "copy ended", "publish ended", "version 1", "goes on at the leader"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in the error", want)
		}
	}
	for _, want := range []string{"plan started", "copy: ", "publish ended", "settle started"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output", want)
		}
	}

	// `ctl rebalance watch --run N`, as the error says, shows the run so
	// far and follows it, here until its own --timeout.
	m := regexp.MustCompile("`shardlimit ctl (rebalance watch --run \\d+)`").FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the error names no watch command: %v", err)
	}
	cmd = ctlCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	out.Reset()
	cmd.SetOut(&out)
	// 10s: room for a loaded machine to connect and replay the run so far;
	// the settle phase (a minute) outlasts it.
	cmd.SetArgs(append(flags, append([]string{"--timeout", "10s"}, strings.Fields(m[1])...)...))
	err = cmd.ExecuteContext(context.Background())
	t.Logf("ctl %s:\n%s\nerror: %v", m[1], out.String(), err)
	if exitCode(err) != exitTimeout || !strings.Contains(err.Error(), "was in phase settle") {
		t.Fatalf("exit %d, want %d and the phase settle named", exitCode(err), exitTimeout)
	}
	for _, want := range []string{"run started by rebalance-0 (trigger ctl)", "plan ended", "copy: ", "publish ended", "settle started"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output of watch", want)
		}
	}
}
