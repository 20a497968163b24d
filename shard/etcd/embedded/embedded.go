package embedded

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/shardlimit/shardlimit/shard/creds"
)

// Etcd is an embedded single-member etcd server.
type Etcd struct {
	server   *embed.Etcd
	endpoint string
	level    zap.AtomicLevel
}

// Start starts an embedded etcd that keeps its data in dir and serves
// clients on clientAddr (host:port; port 0 picks a free one). The peer port
// is always a free one on 127.0.0.1. Each of adjust, when given, changes
// the server's configuration before it starts (tests).
func Start(dir, clientAddr string, adjust ...func(*embed.Config)) (*Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "shardlimit-dev"
	cfg.Dir = dir
	// Errors only, and none while closing (etcd logs its own shutdown as
	// errors).
	level := zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	zcfg := zap.NewProductionConfig()
	zcfg.Level = level
	logger, err := zcfg.Build()
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	client, _ := url.Parse("http://" + clientAddr)
	peer, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A rules file is applied in one transaction of up to one compare and
	// one write per rule; etcd's default of 128 operations is too few.
	cfg.MaxTxnOps = 8192
	for _, f := range adjust {
		f(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after 30s")
	}
	return &Etcd{server: e, endpoint: e.Clients[0].Addr().String(), level: level}, nil
}

// ClientCertAuth is an adjustment for Start: the server serves clients
// over TLS only, with the certificate certFile and its key keyFile, and
// accepts only clients that present a certificate signed by the CA in
// caFile (etcd's --client-cert-auth). A plain-text request, or one without
// such a certificate, is refused.
func ClientCertAuth(certFile, keyFile, caFile string) func(*embed.Config) {
	return func(cfg *embed.Config) {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: caFile, ClientCertAuth: true}
		for _, us := range [][]url.URL{cfg.ListenClientUrls, cfg.AdvertiseClientUrls} {
			for i := range us {
				us[i].Scheme = "https"
			}
		}
	}
}

// StartSecure makes a creds.LocalEtcd PKI in pkiDir, for 127.0.0.1,
// localhost and clientAddr's host, and starts an etcd with its data in dir
// that serves clients on clientAddr with its server certificate and
// accepts only its client certificates (ClientCertAuth): dev's etcd.
func StartSecure(dir, pkiDir, clientAddr string) (*Etcd, *creds.LocalEtcd, error) {
	host, _, err := net.SplitHostPort(clientAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client address: %w", err)
	}
	pki, err := creds.NewLocalEtcd(pkiDir, host)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd credentials: %w", err)
	}
	e, err := Start(dir, clientAddr, ClientCertAuth(pki.Server.Cert, pki.Server.Key, pki.Server.CA))
	return e, pki, err
}

// Endpoint returns the client address, host:port.
func (e *Etcd) Endpoint() string { return e.endpoint }

// Close stops the server.
func (e *Etcd) Close() {
	e.level.SetLevel(zapcore.FatalLevel)
	e.server.Close()
}

// RunTests is a test package's TestMain body: it starts one embedded
// etcd for the whole package, sets *endpoint to its address, runs the tests
// and returns their exit code. Each test then works under its own key
// prefix (New gives every cluster one).
func RunTests(m interface{ Run() int }, endpoint *string) int {
	dir, err := os.MkdirTemp("", "shardlimit-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	e, err := Start(dir, "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Close()
	*endpoint = e.Endpoint()
	return m.Run()
}
