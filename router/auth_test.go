package router_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// The identities of the security tests, besides the cluster's own.
const (
	shopID     = "spiffe://test/service/shop"
	bankID     = "spiffe://test/service/bank"
	strangerID = "spiffe://test/stranger" // a certificate of the cluster's CA that no grant names
)

func securityGrants() []auth.Grant {
	return []auth.Grant{
		{ID: shopID, Role: auth.RoleService, Services: []string{"shop"}},
		{ID: bankID, Role: auth.RoleService, Services: []string{"bank"}},
		{ID: "envoy-edge", Role: auth.RoleService, Services: []string{"shop"}},
	}
}

// caller is one way of calling the cluster.
type caller struct {
	name string
	dial func(addr string) *grpc.ClientConn
	// authenticated callers are refused with PermissionDenied outside their
	// role; the others with Unauthenticated.
	authenticated bool
	// cert: the caller presents a client certificate. Shards and the
	// rebalance job require one in the TLS handshake: the others are
	// refused before any call (Unavailable).
	cert bool
}

func callers(c *clustertest.Cluster) []caller {
	caOnly := func(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
		cfg, err := creds.ClientTLS(creds.Files{CA: c.PKI.Router.CA}, creds.LocalServerName)
		if err != nil {
			panic(err)
		}
		conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))...)
		if err != nil {
			panic(err)
		}
		return conn
	}
	envoyToken := c.Token("envoy-edge")
	return []caller{
		{"no credentials", func(addr string) *grpc.ClientConn { return caOnly(addr) }, false, false},
		{"unknown token", func(addr string) *grpc.ClientConn {
			return caOnly(addr, grpc.WithPerRPCCredentials(creds.PerRPC(creds.StaticToken("slt_made-up"))))
		}, false, false},
		{"certificate without a grant", func(addr string) *grpc.ClientConn { return c.As(addr, strangerID) }, false, true},
		{"service shop (certificate)", func(addr string) *grpc.ClientConn { return c.As(addr, shopID) }, true, true},
		{"service shop (token)", func(addr string) *grpc.ClientConn { return c.WithToken(addr, envoyToken) }, true, false},
		{"operator", func(addr string) *grpc.ClientConn { return c.Operator(addr) }, true, true},
		{"internal", func(addr string) *grpc.ClientConn { return c.Internal(addr) }, true, true},
	}
}

// call is one API call, made on one component.
type call struct {
	name    string
	allowed []string // callers allowed; the others are refused
	do      func(ctx context.Context, conn *grpc.ClientConn) error
}

// Each role against each API: allowed exactly where the method table says,
// refused with Unauthenticated (no or unknown credentials) or
// PermissionDenied (a known caller outside its role) everywhere else.
func TestEachRoleAgainstEachAPI(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t), Grants: securityGrants()})
	j := c.StartRebalance()
	poll.Until(t, 10*time.Second, func() error {
		if !j.Leading() {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	services := []string{"service shop (certificate)", "service shop (token)", "operator"}
	everyone := []string{"no credentials", "unknown token", "certificate without a grant", "service shop (certificate)", "service shop (token)", "operator", "internal"}
	known := everyone[3:]
	shopCheck := &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "matrix", Hits: proto.Int64(0)}}}
	routerCalls := []call{
		{"RateLimiter/Check", services, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewRateLimiterClient(conn).Check(ctx, shopCheck)
			return err
		}},
		{"RateLimitService/ShouldRateLimit", services, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "shop",
				Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}})
			return err
		}},
		{"Admin/ListLimited", services, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).ListLimited(ctx, &shardlimitv1.ListLimitedRequest{Service: "shop"})
			return err
		}},
		{"Admin/ListMembers", services, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
			return err
		}},
		{"Admin/GetRules", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).GetRules(ctx, &shardlimitv1.GetRulesRequest{})
			return err
		}},
		{"Admin/ApplyRules (dry run)", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{DryRun: true,
				Yaml: []byte("rules:\n  - {service: bank, endpoint: /transfer, limit: 1000000000, period: 1ms, failure_policy: allow}\n")})
			return err
		}},
		{"Admin/DeleteRule", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).DeleteRule(ctx, &shardlimitv1.DeleteRuleRequest{Service: "nosuch", Name: "x"})
			return err
		}},
		{"Admin/RebalancePlan", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).RebalancePlan(ctx, &shardlimitv1.PlanRequest{})
			return err
		}},
		{"Admin/RebalanceRun", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "matrix"}})
			return err
		}},
		{"Admin/RebalanceRunStream", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			s, err := shardlimitv1.NewAdminClient(conn).RebalanceRunStream(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "matrix"}})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
		{"Admin/WatchRebalanceRun", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			s, err := shardlimitv1.NewAdminClient(conn).WatchRebalanceRun(ctx, &shardlimitv1.WatchRebalanceRunRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			if status.Code(err) == codes.NotFound {
				return nil // allowed: no run is recorded yet, or none in the matrix so far
			}
			return err
		}},
		{"Admin/ShardMapHistory", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).ShardMapHistory(ctx, &shardlimitv1.ShardMapHistoryRequest{})
			return err
		}},
		{"Admin/ResetKey", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).ResetKey(ctx, &shardlimitv1.ResetKeyRequest{Service: "shop", Rule: "checkout", User: "nobody"})
			return err
		}},
		{"Admin/ListGrants", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).ListGrants(ctx, &shardlimitv1.ListGrantsRequest{})
			return err
		}},
		{"Admin/CreateToken", []string{"operator"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewAdminClient(conn).CreateToken(ctx, &shardlimitv1.CreateTokenRequest{Id: bankID})
			return err
		}},
		{"Health/Check", everyone, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}},
		// A Watch is a stream held open: 50,000 anonymous ones took a
		// router from 76 MB to 640 MB (issue 23). Known callers only.
		{"Health/Watch", known, func(ctx context.Context, conn *grpc.ClientConn) error {
			w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}},
		{"Health/List", known, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := healthpb.NewHealthClient(conn).List(ctx, &healthpb.HealthListRequest{})
			return err
		}},
	}
	shardCalls := []call{
		{"Shard/Stats", []string{"internal"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewShardClient(conn).Stats(ctx, &shardlimitv1.StatsRequest{})
			return err
		}},
		{"Shard/Reset", []string{"internal"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewShardClient(conn).Reset(ctx, &shardlimitv1.ResetRequest{Service: "bank", Rule: "nobody", User: "nobody"})
			return err
		}},
		{"Shard/Drop", []string{"internal"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			// Partition 0 of 1<<16: owned by no one here, so nothing is lost.
			_, err := shardlimitv1.NewShardClient(conn).Drop(ctx, &shardlimitv1.DropRequest{Partitions: []uint32{0}, PartitionCount: 1 << 16})
			return err
		}},
		{"Health/Check", everyone, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}},
	}
	rebalanceCalls := []call{
		{"Rebalancer/Plan", []string{"operator", "internal"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewRebalancerClient(conn).Plan(ctx, &shardlimitv1.PlanRequest{})
			return err
		}},
		{"Rebalancer/Run", []string{"operator", "internal"}, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := shardlimitv1.NewRebalancerClient(conn).Run(ctx, &shardlimitv1.RunRequest{Trigger: "matrix"})
			return err
		}},
	}
	cs := callers(c)
	for _, comp := range []struct {
		name         string
		addr         string
		calls        []call
		certRequired bool
	}{
		{"router", c.Routers[0].Addr(), routerCalls, false},
		{"shard", c.Shards[0].Addr(), shardCalls, true},
		{"rebalance", j.Addr(), rebalanceCalls, true},
	} {
		for _, cl := range cs {
			conn := cl.dial(comp.addr)
			t.Cleanup(func() { _ = conn.Close() })
			for _, call := range comp.calls {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := call.do(ctx, conn)
				cancel()
				code := status.Code(err)
				refused := code == codes.Unauthenticated || code == codes.PermissionDenied
				want := codes.PermissionDenied
				if !cl.authenticated {
					want = codes.Unauthenticated
				}
				if comp.certRequired && !cl.cert {
					if code != codes.Unavailable {
						t.Errorf("%s %s as %s: %v, want Unavailable (no client certificate: the handshake fails)", comp.name, call.name, cl.name, err)
					}
					continue
				}
				switch allowed := slices.Contains(call.allowed, cl.name); {
				case allowed && refused:
					t.Errorf("%s %s as %s: refused: %v", comp.name, call.name, cl.name, err)
				case !allowed && code != want:
					t.Errorf("%s %s as %s: %v, want %v", comp.name, call.name, cl.name, err, want)
				case !allowed && strings.Contains(status.Convert(err).Message(), "slt_"):
					t.Errorf("%s %s as %s: the message echoes the token: %v", comp.name, call.name, cl.name, err)
				}
			}
		}
	}
	// Every refusal was counted by API and reason, with no caller in a label.
	for _, want := range []string{
		`shardlimit_router_auth_refusals_total{api="shardlimit.v1.Admin",reason="role"}`,
		`shardlimit_router_auth_refusals_total{api="shardlimit.v1.RateLimiter",reason="no_credentials"}`,
		`shardlimit_router_auth_refusals_total{api="shardlimit.v1.RateLimiter",reason="unknown_credentials"}`,
		`shardlimit_shard_auth_refusals_total{api="shardlimit.v1.Shard",reason="role"}`,
		`shardlimit_rebalance_auth_refusals_total{api="shardlimit.v1.Rebalancer",reason="role"}`,
	} {
		reg := c.Routers[0].Registry()
		switch {
		case strings.HasPrefix(want, "shardlimit_shard"):
			reg = c.Shards[0].Registry()
		case strings.HasPrefix(want, "shardlimit_rebalance"):
			reg = j.Registry()
		}
		if v := metricValue(t, reg, want); v < 1 {
			t.Errorf("%s = %v, want at least 1", want, v)
		}
	}
}

// Service shop, with its own certificate, can neither spend, read nor give
// back bank's quota, through any API; bank's counters are unchanged.
func TestServiceCannotTouchAnotherServicesKeys(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t), Grants: securityGrants()})
	bank := shardlimitv1.NewRateLimiterClient(c.As(c.Routers[0].Addr(), bankID))
	for range 3 {
		check(t, bank, "bank", "/transfer", "victim") // 2 of 5 left
	}
	for range 6 {
		check(t, bank, "bank", "/transfer", "limited") // limited: an episode and a hot key
	}
	remaining := func() int64 {
		t.Helper()
		resp, err := bank.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "bank", Endpoint: "/transfer", User: "victim", Hits: proto.Int64(0)}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decisions[0].Remaining
	}
	before := remaining()
	if before != 2 {
		t.Fatalf("bank's victim has %d left, want 2", before)
	}

	shopConn := c.As(c.Routers[0].Addr(), shopID)
	shop, shopAdmin := shardlimitv1.NewRateLimiterClient(shopConn), shardlimitv1.NewAdminClient(shopConn)
	ctx := context.Background()
	refused := func(what string, err error) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.PermissionDenied || strings.Contains(st.Message(), "bank") {
			t.Errorf("%s: %v, want PermissionDenied naming no service", what, err)
		}
	}
	_, err := shop.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "bank", Endpoint: "/transfer", User: "victim", Hits: proto.Int64(5)}}})
	refused("check bank", err)
	// One foreign check refuses the whole request: the own one is not
	// counted either.
	_, err = shop.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{
		{Service: "shop", Endpoint: "/checkout", User: "mixed"},
		{Service: "bank", Endpoint: "/transfer", User: "victim"},
	}})
	refused("check shop and bank", err)
	if d := check(t, shop, "shop", "/checkout", "mixed"); d.Remaining != 9 {
		t.Errorf("shop's own check of the refused request was counted: %v", d)
	}
	_, err = rlsv3.NewRateLimitServiceClient(shopConn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "bank",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "victim"}}}}})
	refused("Envoy's API for bank", err)
	_, err = shopAdmin.ListLimited(ctx, &shardlimitv1.ListLimitedRequest{Service: "bank"})
	refused("limited users of bank", err)
	members, err := shopAdmin.ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ownHot := 0
	for _, m := range members.Members {
		for _, k := range m.GetStats().GetHotKeys() {
			if k.Service != "shop" {
				t.Errorf("shop reads a hot key of %s: %v", k.Service, k)
			}
			ownHot++
		}
		// Nothing of the shards themselves: no address, load, keys or
		// memory.
		if st := m.GetStats(); m.Addr != "" || st.GetKeys() != 0 || st.GetMemoryBytes() != 0 || st.GetLoad() != 0 || len(st.GetPartitionLoad()) != 0 || st.GetDecisions() != 0 {
			t.Errorf("shop reads a shard's internals: %v", m)
		}
	}
	if ownHot == 0 {
		t.Error("shop does not see its own hot keys")
	}
	_, err = shopAdmin.ResetKey(ctx, &shardlimitv1.ResetKeyRequest{Service: "bank", Rule: "/transfer", User: "victim"})
	refused("reset bank's key through the router", err)
	owner := c.Owner("bank", "/transfer", "victim")
	_, err = shardlimitv1.NewShardClient(c.As(owner.Addr, shopID)).Reset(ctx, &shardlimitv1.ResetRequest{Service: "bank", Rule: "/transfer", User: "victim"})
	refused("reset bank's key on its shard", err)
	_, err = shardlimitv1.NewShardClient(c.As(owner.Addr, shopID)).Import(ctx, &shardlimitv1.ImportRequest{})
	refused("import on a shard", err)

	if after := remaining(); after != before {
		t.Fatalf("bank's victim has %d left after shop's attempts, want %d", after, before)
	}
	// The operator sees bank's hot keys and may reset them.
	all, err := c.Admin(0).ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(all.Members, func(m *shardlimitv1.Member) bool {
		return slices.ContainsFunc(m.GetStats().GetHotKeys(), func(k *shardlimitv1.HotKey) bool { return k.Service == "bank" })
	}) {
		t.Error("the operator does not see bank's hot keys")
	}
	keys := uint64(0)
	for _, m := range all.Members {
		if m.Addr == "" {
			t.Errorf("the operator does not see a shard's address: %v", m)
		}
		keys += m.GetStats().GetKeys()
	}
	if keys == 0 {
		t.Error("the operator does not see the shards' keys")
	}
	if r, err := c.Admin(0).ResetKey(ctx, &shardlimitv1.ResetKeyRequest{Service: "bank", Rule: "/transfer", User: "victim"}); err != nil || !r.Existed || r.Shard != owner.ID {
		t.Fatalf("operator reset: %v %v", r, err)
	}
	if after := remaining(); after != 5 {
		t.Fatalf("after the operator's reset: %d left, want 5", after)
	}
}

// A router whose certificate is not an internal identity cannot call the
// shards: its checks are answered by failure policy and the shards count
// the refusals.
func TestRouterWithoutTheInternalIdentityCannotCallShards(t *testing.T) {
	var c *clustertest.Cluster
	rogue := false
	c = clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t), Grants: securityGrants(),
		Router: func(o *router.Options) {
			if rogue {
				o.ShardTLS = c.TLS(bankID) // a service's certificate, of the right CA
			}
		}})
	rogue = true
	r := c.StartRouter()
	cl := shardlimitv1.NewRateLimiterClient(c.Operator(r.Addr()))
	for i := range 5 {
		d := check(t, cl, "bank", "/transfer", fmt.Sprintf("u%d", i))
		if !d.FailurePolicy || d.Allowed {
			t.Fatalf("check through the rogue router: %v, want denied by bank's failure policy", d)
		}
	}
	var refused float64
	for _, s := range c.Shards {
		refused += metricValue(t, s.Registry(), `shardlimit_shard_auth_refusals_total{api="shardlimit.v1.Shard",reason="role"}`)
	}
	if refused == 0 {
		t.Fatal("the shards counted no refusal of the rogue router")
	}
	// The cluster's own router still decides.
	if d := check(t, c.Client(0), "bank", "/transfer", "u0"); d.FailurePolicy || !d.Allowed {
		t.Fatalf("through the cluster's router: %v", d)
	}
}

// The shard API is internal-only, and even an internal caller cannot
// import made-up state: a negative fixed_window count (which gave remaining
// 4.6e18) is InvalidArgument and stores nothing of its request.
func TestImportRejectsStatesNoAlgorithmProduces(t *testing.T) {
	rs := append(testRules(t), mustRules(t, "rules:\n  - {service: api, endpoint: /fw, name: fw, algorithm: fixed_window, limit: 10, period: 366d}\n")...)
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: rs})
	cl := c.Client(0)
	check(t, cl, "api", "/fw", "victim")
	sc := c.ShardClient(c.Shards[0])
	ctx := context.Background()
	st, err := sc.ExportStream(ctx, &shardlimitv1.ExportStreamRequest{Partitions: allPartitions(1024), PartitionCount: 1024})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := st.Recv()
	if err != nil || len(exp.Keys) != 1 {
		t.Fatalf("export: %v %v", exp, err)
	}
	good := exp.Keys[0]
	forged := proto.Clone(good).(*shardlimitv1.KeyState)
	forged.B = -1 << 62
	other := proto.Clone(good).(*shardlimitv1.KeyState)
	other.Hi ^= 1 // another key, valid
	for name, bad := range map[string]*shardlimitv1.KeyState{
		"negative count":        forged,
		"window far ahead":      withA(good, time.Now().Add(24*time.Hour).UnixNano()),
		"fresh far ahead":       withFresh(good, 1<<62),
		"times on a window key": withTimes(good, []int64{1}),
	} {
		_, err := sc.Import(ctx, &shardlimitv1.ImportRequest{Keys: []*shardlimitv1.KeyState{other, bad}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "keys[1].") {
			t.Errorf("%s: %v, want InvalidArgument naming keys[1]", name, err)
		}
	}
	if n := c.Keys(c.Shards[0]); n != 1 {
		t.Fatalf("the shard holds %d keys after rejected imports, want 1: nothing of a rejected request is stored", n)
	}
	if d := check(t, cl, "api", "/fw", "victim"); d.Remaining != 8 {
		t.Fatalf("victim after the forged imports: %v, want remaining 8", d)
	}
}

func mustRules(t *testing.T, doc string) []rules.Rule {
	t.Helper()
	rs, err := rules.Parse("more.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// metricValue returns the value of one series of reg, written as
// name{label="value",...}.
func metricValue(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	want := map[string]string{}
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			want[k] = strings.Trim(v, `"`)
		}
	}
	return clustertest.Metric(t, reg, name, want)
}

func allPartitions(n int) []uint32 {
	ps := make([]uint32, n)
	for i := range ps {
		ps[i] = uint32(i)
	}
	return ps
}

func withA(k *shardlimitv1.KeyState, a int64) *shardlimitv1.KeyState {
	k = proto.Clone(k).(*shardlimitv1.KeyState)
	k.A = a
	return k
}

func withFresh(k *shardlimitv1.KeyState, f int64) *shardlimitv1.KeyState {
	k = proto.Clone(k).(*shardlimitv1.KeyState)
	k.FreshUnixNs = f
	return k
}

func withTimes(k *shardlimitv1.KeyState, times []int64) *shardlimitv1.KeyState {
	k = proto.Clone(k).(*shardlimitv1.KeyState)
	k.Times = times
	return k
}
