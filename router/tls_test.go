package router_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard"
)

// testPKI is a CA and one certificate it signed, for 127.0.0.1, good for
// both server and client authentication.
type testPKI struct {
	pool *x509.CertPool
	cert tls.Certificate
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shardlimit test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "shardlimit"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

func (p testPKI) server() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.cert}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

func (p testPKI) client() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.cert}, RootCAs: p.pool, MinVersion: tls.VersionTLS12}
}

// With TLS configured, every hop is mTLS: callers → router, router → shards,
// shard → shard (the second shard joins by pulling counters from the
// first). A plain-text caller and a caller without a client certificate
// are refused.
func TestMutualTLSOnEveryHop(t *testing.T) {
	pki := newPKI(t)
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t),
		Shard: func(o *shard.Options) { o.TLS, o.ShardTLS = pki.server(), pki.client() },
		Router: func(o *router.Options) {
			o.TLS, o.ShardTLS = pki.server(), pki.client()
		},
	})
	dial := func(creds grpc.DialOption) shardlimitv1.RateLimiterClient {
		conn, err := grpc.NewClient(c.Routers[0].Addr(), creds)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return shardlimitv1.NewRateLimiterClient(conn)
	}
	req := &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "tls"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := dial(grpc.WithTransportCredentials(credentials.NewTLS(pki.client()))).Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.Allowed || d.FailurePolicy || d.Remaining != 9 {
		t.Fatalf("over mTLS: %v (the router must reach the shards over mTLS too)", d)
	}
	for name, creds := range map[string]grpc.DialOption{
		"plain text":            grpc.WithTransportCredentials(insecure.NewCredentials()),
		"no client certificate": grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12})),
	} {
		short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := dial(creds).Check(short, req); err == nil {
			t.Errorf("%s caller was served", name)
		}
		cancel()
	}
}
