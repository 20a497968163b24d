package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/shardlimit/shardlimit/shard/creds"
)

// tlsFlags are the TLS files of a component: its own certificate, used as
// the server certificate and as the client certificate towards other
// components (mTLS, and the identity other components grant a role), the
// CA that signs every component's and caller's certificate, and the same
// three for etcd.
type tlsFlags struct {
	cert, key, ca, serverName string
	etcdCert, etcdKey, etcdCA string

	// expiry is what the configs loaded, for registerExpiry.
	expiry certExpiry
}

func (t *tlsFlags) register(f *pflag.FlagSet, etcd bool) {
	f.StringVar(&t.cert, "tls-cert", "", "PEM certificate for gRPC: the server's, and the client's towards other components (its SAN URI or DNS name is the identity grants name); read again when it changes")
	f.StringVar(&t.key, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&t.ca, "tls-ca", "", "PEM CA that signs the other components' and callers' certificates; read again when it changes")
	f.StringVar(&t.serverName, "tls-server-name", "", "name to verify in other components' certificates instead of the dialed address (for pods that advertise an IP); set, the CA file is followed on clients too")
	if etcd {
		f.StringVar(&t.etcdCert, "etcd-cert", "", "PEM client certificate for etcd (read at start)")
		f.StringVar(&t.etcdKey, "etcd-key", "", "PEM key of --etcd-cert")
		f.StringVar(&t.etcdCA, "etcd-ca", "", "PEM CA of the etcd servers; enables TLS to etcd")
	}
}

// registerClient adds the flags of a client of components (bench) that
// are not one itself: the CA of their certificates, its own certificate
// for mTLS, and the name to verify; of names them ("routers").
func (t *tlsFlags) registerClient(f *pflag.FlagSet, of string) {
	f.StringVar(&t.ca, "tls-ca", "", "PEM CA of the "+of+"' certificates")
	f.StringVar(&t.cert, "tls-cert", "", "PEM client certificate (mTLS); with --tls-key, enables TLS")
	f.StringVar(&t.key, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&t.serverName, "tls-server-name", "", "name to verify in the "+of+"' certificates instead of the dialed address")
}

// secureFlags are the flags of a component that serves callers: whether it
// runs without TLS and authentication, and its grants file.
type secureFlags struct {
	insecure   bool
	grantsFile string
}

func (s *secureFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&s.insecure, "insecure", false, "run without TLS and authentication: every caller may call everything (development only; logged and exported as shardlimit_<component>_insecure)")
	f.StringVar(&s.grantsFile, "grants-file", "", "YAML grants file read at start (the internal identities and a first operator), added to the grants in etcd and winning over them")
}

// require fails unless t names the component's certificate, key and CA, or
// s says --insecure.
func (s *secureFlags) require(t *tlsFlags) error {
	if s.insecure || (t.cert != "" && t.key != "" && t.ca != "") {
		return nil
	}
	return usageErrorf("--tls-cert, --tls-key and --tls-ca are required: every hop is mutual TLS and every caller is authorized by the grants; --insecure runs without either (development only)")
}

func loadPair(certFlag, cert, keyFlag, key string) ([]tls.Certificate, error) {
	switch {
	case cert == "" && key == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, fmt.Errorf("%s and %s: both or neither are required", certFlag, keyFlag)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certFlag, keyFlag, err)
	}
	return []tls.Certificate{pair}, nil
}

// configs returns the server, client and etcd TLS configs (nil where the
// flags leave plain text), naming the first bad flag. The server verifies
// client certificates with clientAuth.
func (t *tlsFlags) configs(clientAuth tls.ClientAuthType) (server, client, etcd *tls.Config, err error) {
	if server, err = t.server(clientAuth); err != nil {
		return nil, nil, nil, err
	}
	if client, err = t.client(); err != nil {
		return nil, nil, nil, err
	}
	if etcd, err = t.etcd(); err != nil {
		return nil, nil, nil, err
	}
	return server, client, etcd, nil
}

// server returns the server TLS config, following the files, or nil for
// plain text.
func (t *tlsFlags) server(clientAuth tls.ClientAuthType) (*tls.Config, error) {
	switch {
	case t.cert == "" && t.key == "" && t.ca == "":
		return nil, nil
	case t.cert == "" || t.key == "":
		return nil, fmt.Errorf("--tls-cert and --tls-key: both are required for the server side")
	case t.ca == "":
		return nil, fmt.Errorf("--tls-ca: required to verify callers' certificates")
	}
	cfg, err := creds.ServerTLS(creds.Files{Cert: t.cert, Key: t.key, CA: t.ca, OnLoad: t.expiry.onLoad(certServer)}, clientAuth)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key, --tls-ca: %w", err)
	}
	return cfg, nil
}

// client returns the TLS config for calls to other components, following
// the files, or nil for plain text.
func (t *tlsFlags) client() (*tls.Config, error) {
	if t.cert == "" && t.key == "" && t.ca == "" {
		return nil, nil
	}
	if (t.cert == "") != (t.key == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key: both or neither are required")
	}
	cfg, err := creds.ClientTLS(creds.Files{Cert: t.cert, Key: t.key, CA: t.ca, OnLoad: t.expiry.onLoad(certClient)}, t.serverName)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key, --tls-ca: %w", err)
	}
	return cfg, nil
}

// etcd returns the TLS config for etcd, or nil for plain text.
func (t *tlsFlags) etcd() (*tls.Config, error) {
	certs, err := loadPair("--etcd-cert", t.etcdCert, "--etcd-key", t.etcdKey)
	if err != nil || (certs == nil && t.etcdCA == "") {
		return nil, err
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if certs != nil {
		notAfter, _ := creds.NotAfter(certs[0]) // it parsed
		t.expiry.set(certEtcdClient, notAfter)
	}
	if t.etcdCA != "" {
		pool, notAfter, err := creds.LoadCAExpiry(t.etcdCA)
		if err != nil {
			return nil, fmt.Errorf("--etcd-ca: %w", err)
		}
		cfg.RootCAs = pool
		t.expiry.set(certEtcdCA, notAfter)
	}
	return cfg, nil
}

// The cert label's values of the certificate expiry metric: the
// certificates a component loads, by the role each plays.
const (
	certServer     = "server"      // --tls-cert, served to callers
	certClient     = "client"      // --tls-cert, presented to other components
	certCA         = "ca"          // --tls-ca: its earliest certificate
	certEtcdClient = "etcd_client" // --etcd-cert (read at start)
	certEtcdCA     = "etcd_ca"     // --etcd-ca: its earliest certificate (read at start)
)

// certExpiry holds the expiry (notAfter) of each certificate a component
// loaded, by role (cert* above), set whenever its files load: at start,
// and for --tls-* whenever they change and parse again. A component's
// registry exports it (registerExpiry).
type certExpiry struct {
	mu       sync.Mutex
	notAfter map[string]time.Time
}

func (e *certExpiry) set(cert string, notAfter time.Time) {
	if notAfter.IsZero() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.notAfter == nil {
		e.notAfter = map[string]time.Time{}
	}
	e.notAfter[cert] = notAfter
}

// onLoad records what a TLS config of role cert (server or client) loaded.
func (e *certExpiry) onLoad(cert string) func(creds.Loaded) {
	return func(l creds.Loaded) {
		e.set(cert, l.Cert)
		e.set(certCA, l.CA)
	}
}

// registerExpiry adds
// shardlimit_<component>_certificate_expiry_timestamp_seconds{cert} to a
// component's registry: the notAfter, in Unix seconds, of each certificate
// it loaded, as last loaded. The ShardlimitCertificateExpiring alert reads
// it. An --insecure component loads none and exports no series.
func (t *tlsFlags) registerExpiry(reg prometheus.Registerer, component string) error {
	c := expiryCollector{e: &t.expiry, desc: prometheus.NewDesc(
		"shardlimit_"+component+"_certificate_expiry_timestamp_seconds",
		"Expiry (notAfter) of each certificate the "+component+" loaded, in Unix seconds, by cert: server and client (--tls-cert), ca (the earliest of --tls-ca), etcd_client (--etcd-cert), etcd_ca (the earliest of --etcd-ca). Set whenever the files load; --tls-* files load again when they change.",
		[]string{"cert"}, nil)}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("certificate expiry metric: %w", err)
	}
	return nil
}

type expiryCollector struct {
	e    *certExpiry
	desc *prometheus.Desc
}

func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	for cert, notAfter := range c.e.notAfter {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(notAfter.Unix()), cert)
	}
}

// etcdPlainText reports whether a component reaches etcd in plain text:
// no --etcd-ca nor --etcd-cert, or an http:// endpoint.
func etcdPlainText(endpoints []string, etcdTLS *tls.Config) bool {
	return etcdTLS == nil || slices.ContainsFunc(endpoints, func(e string) bool { return strings.HasPrefix(e, "http://") })
}

// registerEtcdInsecure adds shardlimit_<component>_etcd_insecure to a
// component's registry, 1 when it reaches etcd in plain text, and then
// logs a warning, once: whoever reaches etcd reads every grant and rule
// and can write itself an operator grant. The ShardlimitEtcdInsecure
// alert reads it.
func registerEtcdInsecure(reg prometheus.Registerer, component string, plainText bool, log *slog.Logger) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "shardlimit_" + component + "_etcd_insecure",
		Help: "1 when the " + component + " reaches etcd in plain text (no --etcd-ca or --etcd-cert, or an http:// endpoint): anyone on the path reads and writes every grant and rule. 0 with TLS.",
	})
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("etcd insecure metric: %w", err)
	}
	if plainText {
		g.Set(1)
		log.Warn("etcd is reached in PLAIN TEXT: whoever reaches it reads every grant and rule and can grant itself operator; give --etcd-ca, --etcd-cert and --etcd-key (development only)")
	}
	return nil
}
