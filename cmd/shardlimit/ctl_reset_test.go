package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
)

// `ctl reset` selects counters as `ctl check` does (--service, --endpoint
// and the key attributes), resetting every counted rule of the endpoint;
// --rule with the counter's name still works.
func TestCtlResetByEndpoint(t *testing.T) {
	const doc = `rules:
  - {service: shop, endpoint: /checkout, name: per-user, limit: 1, period: 1h}
  - {service: shop, endpoint: /checkout, name: per-user-ip, key: [user, ip], limit: 1, period: 1h}
  - {service: shop, endpoint: /cart, name: cart, limit: 1, period: 1h}
`
	c := ctlCluster(t, doc, clustertest.Options{Shards: 2, Router: func(o *router.Options) { o.OverLimitCache = -1 }})
	file := filepath.Join(t.TempDir(), "reset.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) (string, error) {
		out, _, err := runCtl(append(args, operatorFlags(c)...)...)
		return out, err
	}
	if _, err := ctl("rules", "apply", "-f", file); err != nil { // the rules in etcd, as the router's
		t.Fatal(err)
	}
	allowed := func(endpoint string) bool {
		t.Helper()
		resp, err := c.Client(0).Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: endpoint, User: "alice", Ip: "10.0.0.1"}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decisions[0].Allowed
	}
	for _, ep := range []string{"/checkout", "/cart"} {
		if !allowed(ep) || allowed(ep) {
			t.Fatalf("%s: want the first check allowed, the second denied", ep)
		}
	}

	out, err := ctl("reset", "--service", "shop", "--endpoint", "/checkout", "--user", "alice", "--ip", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shop/per-user user=alice on shard-", "shop/per-user-ip user=alice|10.0.0.1 on shard-"} {
		if !strings.Contains(out, want) || strings.Count(out, "was reset\n") != 2 {
			t.Errorf("reset --endpoint printed:\n%s\nwant %q, twice was reset", out, want)
		}
	}
	if !allowed("/checkout") || allowed("/cart") {
		t.Errorf("after reset --endpoint /checkout: /checkout should be allowed again, /cart still denied")
	}

	if _, err := ctl("reset", "--service", "shop", "--endpoint", "/checkout", "--user", "alice"); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--ip: required: rule shop/per-user-ip keys its counters by [user ip]") {
		t.Errorf("reset without --ip: %v (exit %d)", err, exitCode(err))
	}
	if _, err := ctl("reset", "--service", "shop", "--endpoint", "/nothing", "--user", "alice"); exitCode(err) != exitFailed || !errors.Is(err, errNoRule) {
		t.Errorf("reset of an endpoint without rules: %v (exit %d)", err, exitCode(err))
	}
	if _, err := ctl("reset", "--service", "shop", "--user", "alice"); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--endpoint: required") {
		t.Errorf("reset without --endpoint: %v (exit %d)", err, exitCode(err))
	}

	// The old selector: the rule's name, and the counter's.
	if out, err := ctl("reset", "--service", "shop", "--rule", "cart", "--user", "alice"); err != nil || !strings.HasPrefix(out, "shop/cart user=alice on shard-") || !strings.HasSuffix(out, " was reset\n") {
		t.Errorf("reset --rule: %q, %v", out, err)
	}
	if !allowed("/cart") {
		t.Errorf("after reset --rule cart: /cart should be allowed again")
	}
}
