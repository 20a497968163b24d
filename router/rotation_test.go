package router_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Certificates and tokens are rotated by rewriting their files while
// checks run: the router's and shards' certificates, a service's client
// certificate, and a service's token (a new one made, written, then the old
// one revoked). Not one check fails, and the new files are in use after.
func TestRotationUnderLoadDropsNoRequest(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t), Grants: securityGrants()})
	addr := c.Routers[0].Addr()
	dir := t.TempDir()
	issue := func(name, uri string) creds.Files {
		t.Helper()
		f, err := c.PKI.CA.IssueFiles(dir, name, creds.Leaf{URIs: []string{uri}, DNSNames: []string{creds.LocalServerName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	shopFiles := issue("shop", shopID)
	shopTLS, err := creds.ClientTLS(shopFiles, creds.LocalServerName)
	if err != nil {
		t.Fatal(err)
	}
	oldToken := c.Token("envoy-edge")
	tokenPath := filepath.Join(dir, "envoy.token")
	if err := creds.WriteFile(tokenPath, []byte(oldToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile, err := creds.NewTokenFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	caOnly, err := creds.ClientTLS(creds.Files{CA: c.PKI.Router.CA}, creds.LocalServerName)
	if err != nil {
		t.Fatal(err)
	}
	tokenClient, err := client.New(client.Options{Routers: []string{addr}, TLS: caOnly, Token: tokenFile.Token, Timeout: 10 * time.Second, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tokenClient.Close()

	// Two workers: one checks with the token client, one with the
	// certificate, on a new connection every 10 checks so that new
	// handshakes see the rotated certificates.
	var errs, calls [2]atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		firstErr.CompareAndSwap(nil, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d, err := tokenClient.Check(context.Background(), "shop", "/checkout", fmt.Sprintf("tok-%d", i%50), 0)
			if err == nil && d.FromFailureMode {
				err = fmt.Errorf("answered by failure mode")
			}
			if err != nil {
				errs[0].Add(1)
				fail(fmt.Errorf("token check %d: %w", i, err))
			}
			calls[0].Add(1)
		}
	})
	wg.Go(func() {
		var conn *grpc.ClientConn
		defer func() { _ = conn.Close() }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%10 == 0 {
				if conn != nil {
					_ = conn.Close()
				}
				conn, _ = grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(shopTLS)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if code := readShop(ctx, shardlimitv1.NewRateLimiterClient(conn)); code != 0 {
				errs[1].Add(1)
				fail(fmt.Errorf("certificate check %d: %v", i, code))
			}
			cancel()
			calls[1].Add(1)
		}
	})
	// waitCalls waits until both workers made n more calls: every call in
	// flight before has ended.
	waitCalls := func(n int64) {
		t.Helper()
		from := [2]int64{calls[0].Load(), calls[1].Load()}
		poll.Until(t, 20*time.Second, func() error {
			for i := range calls {
				if calls[i].Load() < from[i]+n {
					return fmt.Errorf("worker %d made %d calls of %d", i, calls[i].Load()-from[i], n)
				}
			}
			return nil
		})
	}
	waitCalls(20)

	// The router's and the shards' certificates, the service's client
	// certificate: new ones, same names and CA.
	oldServer := servingSerial(t, addr, caOnly)
	for _, f := range []struct {
		files creds.Files
		uri   string
	}{{c.PKI.Router, creds.RouterID}, {c.PKI.Shard, creds.ShardID}} {
		if _, err := c.PKI.CA.IssueFiles(filepath.Dir(f.files.Cert), trimExt(f.files.Cert), creds.Leaf{URIs: []string{f.uri},
			DNSNames: []string{creds.LocalServerName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	issue("shop", shopID)
	poll.Until(t, 10*time.Second, func() error {
		if servingSerial(t, addr, caOnly) == oldServer {
			return fmt.Errorf("the router still serves its old certificate")
		}
		return nil
	})
	waitCalls(20)

	// The token: a new one made and written; once the client sends it
	// (every call in flight with the old one has ended), the old one is
	// revoked.
	tok, err := c.Admin(0).CreateToken(context.Background(), &shardlimitv1.CreateTokenRequest{Id: "envoy-edge"})
	if err != nil {
		t.Fatal(err)
	}
	// The token reaches the routers through etcd: the client gets it once
	// every router recognises it, as an operator would wait.
	poll.Until(t, 10*time.Second, func() error {
		for i, r := range c.Routers {
			if code := readShop(context.Background(), shardlimitv1.NewRateLimiterClient(c.WithToken(r.Addr(), tok.Token))); code != 0 {
				return fmt.Errorf("router %d answers the new token with %v", i, code)
			}
		}
		return nil
	})
	if err := creds.WriteFile(tokenPath, []byte(tok.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if got, _ := tokenFile.Token(context.Background()); got != tok.Token {
			return fmt.Errorf("the client still reads the old token")
		}
		return nil
	})
	waitCalls(5)
	var oldID string
	for _, g := range listGrants(t, c) {
		if g.Id == "envoy-edge" {
			for _, tk := range g.Tokens {
				if tk.Id != tok.Info.Id {
					oldID = tk.Id
				}
			}
		}
	}
	if _, err := c.Admin(0).Revoke(context.Background(), &shardlimitv1.RevokeRequest{Id: "envoy-edge", TokenId: oldID}); err != nil {
		t.Fatal(err)
	}
	// The old token is refused within a second, the new one still works.
	poll.Until(t, 10*time.Second, func() error {
		if code := readShop(context.Background(), shardlimitv1.NewRateLimiterClient(c.WithToken(addr, oldToken))); code == 0 {
			return fmt.Errorf("the old token still works")
		}
		return nil
	})
	waitCalls(20)
	close(stop)
	wg.Wait()
	t.Logf("%d token checks, %d certificate checks", calls[0].Load(), calls[1].Load())
	if n := errs[0].Load() + errs[1].Load(); n > 0 {
		t.Fatalf("%d checks failed during rotation; first: %v", n, firstErr.Load())
	}
}

func trimExt(path string) string {
	base := filepath.Base(path)
	return base[:len(base)-len(filepath.Ext(base))]
}

// servingSerial returns the serial number of the certificate addr serves.
func servingSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg.Clone())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func listGrants(t *testing.T, c *clustertest.Cluster) []*shardlimitv1.GrantInfo {
	t.Helper()
	l, err := c.Admin(0).ListGrants(context.Background(), &shardlimitv1.ListGrantsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Grants
}
