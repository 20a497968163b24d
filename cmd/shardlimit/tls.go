package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

// tlsFlags are the TLS files of a component: its own certificate, used as
// the server certificate and as the client certificate towards other
// components (mTLS), the CA that signs every component's certificate, and
// the same three for etcd.
type tlsFlags struct {
	cert, key, ca, serverName string
	etcdCert, etcdKey, etcdCA string
}

func (t *tlsFlags) register(f *pflag.FlagSet, etcd bool) {
	f.StringVar(&t.cert, "tls-cert", "", "PEM certificate for gRPC (server, and client towards other components); with --tls-key enables TLS")
	f.StringVar(&t.key, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&t.ca, "tls-ca", "", "PEM CA that signs the other components' certificates; a server then requires client certificates (mTLS)")
	f.StringVar(&t.serverName, "tls-server-name", "", "name to verify in other components' certificates instead of the dialed address (for pods that advertise an IP)")
	if etcd {
		f.StringVar(&t.etcdCert, "etcd-cert", "", "PEM client certificate for etcd")
		f.StringVar(&t.etcdKey, "etcd-key", "", "PEM key of --etcd-cert")
		f.StringVar(&t.etcdCA, "etcd-ca", "", "PEM CA of the etcd servers; enables TLS to etcd")
	}
}

func loadCA(flag, path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", flag, path)
	}
	return pool, nil
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
// flags leave plain text), naming the first bad flag.
func (t *tlsFlags) configs() (server, client, etcd *tls.Config, err error) {
	if server, err = t.server(); err != nil {
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

// server returns the server TLS config, or nil for plain text.
func (t *tlsFlags) server() (*tls.Config, error) {
	certs, err := loadPair("--tls-cert", t.cert, "--tls-key", t.key)
	if err != nil || certs == nil {
		if err == nil && t.ca != "" {
			err = fmt.Errorf("--tls-ca: needs --tls-cert and --tls-key for the server side")
		}
		return nil, err
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if t.ca != "" {
		if cfg.ClientCAs, err = loadCA("--tls-ca", t.ca); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// client returns the TLS config for calls to other components, or nil for
// plain text.
func (t *tlsFlags) client() (*tls.Config, error) {
	certs, err := loadPair("--tls-cert", t.cert, "--tls-key", t.key)
	if err != nil || (certs == nil && t.ca == "") {
		return nil, err
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	if t.ca != "" {
		if cfg.RootCAs, err = loadCA("--tls-ca", t.ca); err != nil {
			return nil, err
		}
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
	if t.etcdCA != "" {
		if cfg.RootCAs, err = loadCA("--etcd-ca", t.etcdCA); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
