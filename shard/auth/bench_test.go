package auth

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// The interceptor's cost per call, on the router's hot path: identify by
// certificate or token, look the method up, put the caller in the context,
// and one MayUse.
func BenchmarkUnary(b *testing.B) {
	a, _ := New(Options{Component: "router", Logger: slog.New(slog.DiscardHandler)})
	token, stored, _ := NewToken(time.Now())
	a.SetGrants(NewSet([]Grant{
		{ID: "spiffe://shardlimit/service/shop", Role: RoleService, Services: []string{"shop"}},
		{ID: "envoy", Role: RoleService, Services: []string{"shop"}, Tokens: []Token{stored}},
	}), 0)
	info := &grpc.UnaryServerInfo{FullMethod: "/shardlimit.v1.RateLimiter/Check"}
	handler := func(ctx context.Context, _ any) (any, error) { return nil, FromContext(ctx).MayUse("shop") }
	cert := testCert(&testing.T{}, []string{"spiffe://shardlimit/service/shop"}, []string{"shop.example"})
	for name, ctx := range map[string]context.Context{
		"certificate": callCtx(cert),
		"token":       callCtx(nil, "Bearer "+token),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Unary(ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
