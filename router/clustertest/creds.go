package clustertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Operator connects to addr with the operator's certificate.
func (c *Cluster) Operator(addr string) *grpc.ClientConn { return c.As(addr, creds.OperatorID) }

// Internal connects to addr with the router's certificate, an internal
// identity.
func (c *Cluster) Internal(addr string) *grpc.ClientConn { return c.As(addr, creds.RouterID) }

// As connects to addr with a certificate of the cluster's CA for identity
// id (a SAN URI); the connection closes with the test. Whether id may call
// anything is up to the grants. In an Insecure cluster it connects in plain
// text.
func (c *Cluster) As(addr, id string) *grpc.ClientConn {
	c.tb.Helper()
	if c.PKI == nil {
		return c.dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	return c.dial(addr, grpc.WithTransportCredentials(credentials.NewTLS(c.TLS(id))))
}

// TLS returns a client TLS config with a certificate of the cluster's CA
// for identity id (a SAN URI), issued on first use, that verifies the
// cluster's servers; nil in an Insecure cluster.
func (c *Cluster) TLS(id string) *tls.Config {
	c.tb.Helper()
	if c.PKI == nil {
		return nil
	}
	c.certsMu.Lock()
	f, ok := c.certs[id]
	if !ok {
		var err error
		if f, err = c.PKI.Issue(fmt.Sprintf("as-%d", len(c.certs)), id); err != nil {
			c.certsMu.Unlock()
			c.tb.Fatal(err)
		}
		c.certs[id] = f
	}
	c.certsMu.Unlock()
	return c.clientTLS(f)
}

// WithToken connects to addr without a client certificate, sending token
// as "authorization: Bearer <token>" with every call.
func (c *Cluster) WithToken(addr, token string) *grpc.ClientConn {
	c.tb.Helper()
	return c.dial(addr, grpc.WithTransportCredentials(credentials.NewTLS(c.clientTLS(creds.Files{CA: c.PKI.Router.CA}))),
		grpc.WithPerRPCCredentials(creds.PerRPC(creds.StaticToken(token))))
}

// ServerOptions returns the options of a gRPC server that serves like a
// router of the cluster, for a test that serves a handler on a server of
// its own: the router's certificate, and an Authorizer that holds the
// cluster's first grants (PKI.Grants). Insecure clusters get none.
func (c *Cluster) ServerOptions() []grpc.ServerOption {
	c.tb.Helper()
	if c.PKI == nil {
		return nil
	}
	a, err := auth.New(auth.Options{Component: "test", Logger: Logger()})
	if err != nil {
		c.tb.Fatal(err)
	}
	a.SetGrants(auth.NewSet(c.PKI.Grants()), 0)
	return append(a.ServerOptions(), grpc.Creds(credentials.NewTLS(c.serverTLS(c.PKI.Router, tls.VerifyClientCertIfGiven))))
}

// serverTLS returns a server TLS config of the cluster's CA for the
// certificate f that verifies client certificates with clientAuth.
func (c *Cluster) serverTLS(f creds.Files, clientAuth tls.ClientAuthType) *tls.Config {
	c.tb.Helper()
	cfg, err := creds.ServerTLS(f, clientAuth)
	if err != nil {
		c.tb.Fatal(err)
	}
	return cfg
}

// clientTLS returns a client TLS config presenting f's certificate (if
// any) and verifying servers' certificates for localhost.
func (c *Cluster) clientTLS(f creds.Files) *tls.Config {
	c.tb.Helper()
	cfg, err := creds.ClientTLS(f, creds.LocalServerName)
	if err != nil {
		c.tb.Fatal(err)
	}
	return cfg
}

// Grant stores g in etcd, replacing any grant of its id; routers and
// shards apply it within a second.
func (c *Cluster) Grant(g auth.Grant) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := grantstore.Modify(ctx, c.etcdClient(), etcd.Layout(c.Prefix), g.ID, func(cur *auth.Grant) (grantstore.Change, error) {
		if cur != nil {
			g.Tokens = append(cur.Tokens, g.Tokens...)
		}
		return grantstore.Change{Grant: g}, nil
	}); err != nil {
		c.tb.Fatalf("grant %s: %v", g.ID, err)
	}
}

// Token makes a token for the stored grant of id, stores its hash and
// returns it once every router of the cluster recognises it, so that a
// test's first call with it is not refused while the grant travels.
func (c *Cluster) Token(id string) string {
	c.tb.Helper()
	token, stored, err := auth.NewToken(time.Now())
	if err != nil {
		c.tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := grantstore.Modify(ctx, c.etcdClient(), etcd.Layout(c.Prefix), id, func(cur *auth.Grant) (grantstore.Change, error) {
		if cur == nil {
			return grantstore.Change{}, grantstore.ErrNotFound
		}
		g := *cur
		g.Tokens = append(slices.Clone(g.Tokens), stored)
		return grantstore.Change{Grant: g}, nil
	}); err != nil {
		c.tb.Fatalf("token for %s: %v", id, err)
	}
	if c.PKI == nil {
		return token
	}
	caOnly := c.clientTLS(creds.Files{CA: c.PKI.Router.CA})
	for _, r := range c.Routers {
		// An empty check: refused UNAUTHENTICATED while the router does
		// not know the token, and for what it is (or allowed) once it does.
		cl := shardlimitv1.NewRateLimiterClient(c.dial(r.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(caOnly))))
		poll.Until(c.tb, hangGuard, func() error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
			if _, err := cl.Check(ctx, &shardlimitv1.CheckRequest{}); status.Code(err) == codes.Unauthenticated {
				return fmt.Errorf("router %s does not know the token of %s yet: %v", r.Addr(), id, err)
			}
			return nil
		})
	}
	return token
}
