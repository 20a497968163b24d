package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// readShop returns the code of a read of shop's checkout through cl.
func readShop(ctx context.Context, cl shardlimitv1.RateLimiterClient) codes.Code {
	_, err := cl.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "g", Hits: proto.Int64(0)}}})
	return status.Code(err)
}

// waitCode waits until a read of shop through every client answers want.
func waitCode(t *testing.T, what string, want codes.Code, cls ...shardlimitv1.RateLimiterClient) {
	t.Helper()
	start := time.Now()
	poll.Until(t, 10*time.Second, func() error {
		for i, cl := range cls {
			if got := readShop(context.Background(), cl); got != want {
				return fmt.Errorf("%s: router %d answers %v, want %v", what, i, got, want)
			}
		}
		return nil
	})
	t.Logf("%s: every router within %v", what, time.Since(start).Round(time.Millisecond))
}

// Grants made through the Admin API apply on every router within a second
// (polled, not asserted); an invalid value written straight into etcd
// refuses its identity on every router alike, also on one started after
// it; tokens are made once and revoked one by one.
func TestGrantsInEtcdApplyOnEveryRouter(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Routers: 2, Rules: testRules(t)})
	const late = "spiffe://test/late"
	asLate := []shardlimitv1.RateLimiterClient{
		shardlimitv1.NewRateLimiterClient(c.As(c.Routers[0].Addr(), late)),
		shardlimitv1.NewRateLimiterClient(c.As(c.Routers[1].Addr(), late)),
	}
	adm := c.Admin(0)
	ctx := context.Background()
	waitCode(t, "before any grant", codes.Unauthenticated, asLate...)

	// Invalid grants store nothing and name the field.
	for _, req := range []*shardlimitv1.GrantRequest{
		{Id: late, Role: "admin"},
		{Id: late, Role: "service"},
		{Id: late, Role: "operator", Services: []string{"shop"}},
		{Id: "has space", Role: "operator"},
		{Id: late, Role: "service", Services: []string{"a/b"}},
	} {
		_, err := adm.Grant(ctx, req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), ": ") {
			t.Errorf("grant %v: %v, want InvalidArgument naming the field", req, err)
		}
	}
	if l, err := adm.ListGrants(ctx, &shardlimitv1.ListGrantsRequest{}); err != nil || len(l.Grants) != len(c.PKI.Grants()) {
		t.Fatalf("after invalid grants: %v %v, want the %d of the grants file only", l, err, len(c.PKI.Grants()))
	}

	if _, err := adm.Grant(ctx, &shardlimitv1.GrantRequest{Id: late, Role: "service", Services: []string{"bank"}}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "granted bank only", codes.PermissionDenied, asLate...)
	if _, err := adm.Grant(ctx, &shardlimitv1.GrantRequest{Id: late, Role: "service", Services: []string{"bank", "shop"}}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "granted shop", codes.OK, asLate...)

	// A token, shown once; listed by id only.
	tok, err := adm.CreateToken(ctx, &shardlimitv1.CreateTokenRequest{Id: late})
	if err != nil || !strings.HasPrefix(tok.Token, "slt_") {
		t.Fatalf("create token: %v %v", tok, err)
	}
	byToken := []shardlimitv1.RateLimiterClient{
		shardlimitv1.NewRateLimiterClient(c.WithToken(c.Routers[0].Addr(), tok.Token)),
		shardlimitv1.NewRateLimiterClient(c.WithToken(c.Routers[1].Addr(), tok.Token)),
	}
	waitCode(t, "new token", codes.OK, byToken...)
	list, err := adm.ListGrants(ctx, &shardlimitv1.ListGrantsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := list.String(); strings.Contains(s, tok.Token) || strings.Contains(s, "sha256") || !strings.Contains(s, tok.Info.Id) || !strings.Contains(s, `source:"file"`) {
		t.Fatalf("list shows a token or its hash, or not the token's id and the file's grants: %s", s)
	}
	// Services revoked one by one, then the token, then the grant.
	if _, err := adm.Revoke(ctx, &shardlimitv1.RevokeRequest{Id: late, Services: []string{"shop"}}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "shop revoked", codes.PermissionDenied, asLate...)
	if _, err := adm.Revoke(ctx, &shardlimitv1.RevokeRequest{Id: late, TokenId: tok.Info.Id}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "token revoked", codes.Unauthenticated, byToken...)

	// The file's grants cannot be changed through etcd.
	if _, err := adm.Revoke(ctx, &shardlimitv1.RevokeRequest{Id: creds.RouterID}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("revoke the router's grant: %v, want FailedPrecondition", err)
	}

	// An invalid value written into etcd: every router refuses the
	// identity, and counts the grant as invalid; a router started after
	// does the same.
	if _, err := adm.Grant(ctx, &shardlimitv1.GrantRequest{Id: late, Role: "service", Services: []string{"shop"}}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "granted again", codes.OK, asLate...)
	cli, err := etcd.Dial([]string{c.Etcd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, etcd.Layout(c.Prefix).Grant(late), "id: "+late+"\nrole: admin\n"); err != nil {
		t.Fatal(err)
	}
	waitCode(t, "invalid in etcd", codes.Unauthenticated, asLate...)
	r := c.StartRouter()
	waitCode(t, "invalid in etcd, new router", codes.Unauthenticated, shardlimitv1.NewRateLimiterClient(c.As(r.Addr(), late)))
	// The gauge is set just after the grants are put in force: wait for it.
	poll.Until(t, 10*time.Second, func() error {
		for i, rt := range c.Routers {
			if v := metricValue(t, rt.Registry(), "shardlimit_router_grants_invalid"); v != 1 {
				return fmt.Errorf("router %d: shardlimit_router_grants_invalid %v, want 1", i, v)
			}
		}
		return nil
	})
	if l, err := adm.ListGrants(ctx, &shardlimitv1.ListGrantsRequest{}); err != nil || len(l.Invalid) != 1 {
		t.Fatalf("list with an invalid grant: %v %v", l, err)
	}
	if r, err := adm.Revoke(ctx, &shardlimitv1.RevokeRequest{Id: late}); err != nil || r.Existed {
		t.Fatalf("revoke an invalid grant: %v %v, want it deleted, reported as not existing", r, err)
	}
}
