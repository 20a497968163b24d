package router_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/logtest"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// At debug, a router tells the story of a shard that stalls and comes
// back: the members it routes to, the failed calls, the circuit opening,
// a summary of the checks answered by failure policy, the stream ending
// and reopening, and the circuit closing. Never a line per check.
func TestDebugLogsTellAShardStall(t *testing.T) {
	const cooldown = 200 * time.Millisecond
	logs := &logtest.Buffer{}
	proxy := clustertest.NewProxy(t)
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{
		Shards: 1,
		Rules:  []rules.Rule{{Service: "shop", Endpoint: "/checkout", Name: "checkout", Limit: 1_000_000, Period: rules.Duration(time.Minute)}},
		Shard:  func(o *shard.Options) { o.Advertise = proxy.Addr() },
		Router: func(o *router.Options) {
			o.Deadline, o.BreakerFailures, o.BreakerCooldown = 100*time.Millisecond, 3, cooldown
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
	})
	proxy.SetTarget(c.Shards[0].Addr())
	cl := c.Client(0)
	ask := func(user string) *shardlimitv1.Decision {
		resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: user}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decisions[0]
	}
	poll.Until(t, 10*time.Second, func() error {
		if d := ask("warm"); d.FailurePolicy {
			return fmt.Errorf("not decided by the shard yet")
		}
		return nil
	})
	shardID := c.Shards[0].ID()
	proxy.Pause()
	poll.Until(t, 20*time.Second, func() error {
		ask("stalled")
		for _, want := range []string{"shard call failed", "shard circuit open", "checks answered without the shard", "DecideStream to the shard ended"} {
			if !strings.Contains(logs.String(), want) {
				return fmt.Errorf("no %q line yet", want)
			}
		}
		return nil
	})
	proxy.Resume()
	poll.Until(t, 20*time.Second, func() error {
		if d := ask("back"); d.FailurePolicy {
			return fmt.Errorf("still answered by policy")
		}
		if !strings.Contains(logs.String(), "shard circuit closed") {
			return fmt.Errorf("no circuit closed line yet")
		}
		return nil
	})
	out := logs.String()
	for _, want := range []string{`msg="shard members in detail" added=[` + shardID, "DecideStream to the shard reopened", "shard=" + shardID} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the router's debug log:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "user=") || strings.Contains(l, "stalled") {
			t.Errorf("a line names a check's user: %s", l)
		}
	}
}
