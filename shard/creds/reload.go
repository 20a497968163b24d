package creds

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CheckEvery is how often, at most, a file in use is looked at again
// (one stat per file) to see whether it changed. A changed file is read
// and, if it parses, used from the next handshake or call on; if it does
// not parse (half-written, or a key that does not match its certificate),
// the last good one stays in use and the error is kept for Err.
const CheckEvery = time.Second

// watched is what was loaded from a set of files, reloaded when any of
// them changes.
type watched[T any] struct {
	paths []string
	load  func() (T, error)

	cur     atomic.Pointer[T]
	checked atomic.Int64 // Unix ns of the last look at the files
	mu      sync.Mutex   // one reloader at a time
	stamps  []os.FileInfo
	err     atomic.Pointer[error]
}

// watch loads the files once, failing when they do not parse.
func watch[T any](load func() (T, error), paths ...string) (*watched[T], error) {
	w := &watched[T]{paths: paths, load: load}
	stamps, err := stat(paths)
	if err != nil {
		return nil, err
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	w.stamps = stamps
	w.cur.Store(&v)
	w.checked.Store(time.Now().UnixNano())
	return w, nil
}

// get returns what the files hold now, looking at them at most once per
// CheckEvery.
func (w *watched[T]) get() T {
	now := time.Now().UnixNano()
	if now-w.checked.Load() >= int64(CheckEvery) && w.mu.TryLock() {
		w.checked.Store(now)
		w.reload()
		w.mu.Unlock()
	}
	return *w.cur.Load()
}

// reload reads the files again if any changed. w.mu is held.
func (w *watched[T]) reload() {
	stamps, err := stat(w.paths)
	if err != nil {
		w.err.Store(&err)
		return
	}
	changed := false
	for i, st := range stamps {
		old := w.stamps[i]
		if !os.SameFile(old, st) || !old.ModTime().Equal(st.ModTime()) || old.Size() != st.Size() {
			changed = true
		}
	}
	if !changed {
		return
	}
	v, err := w.load()
	if err != nil {
		// Keep the last good files, and look again next time: the
		// writer may not be done.
		w.err.Store(&err)
		return
	}
	w.stamps = stamps
	w.cur.Store(&v)
	w.err.Store(nil)
}

// Err returns why the last reload failed, or nil.
func (w *watched[T]) Err() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

func stat(paths []string) ([]os.FileInfo, error) {
	out := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// LoadCA reads a PEM file of CA certificates into a pool.
func LoadCA(path string) (*x509.CertPool, error) {
	pool, _, err := loadCA(path)
	return pool, err
}

// LoadCAExpiry is LoadCA, also returning the earliest notAfter among the
// file's certificates (Loaded.CA).
func LoadCAExpiry(path string) (*x509.CertPool, time.Time, error) {
	return loadCA(path)
}

func loadCA(path string) (*x509.CertPool, time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	pool := x509.NewCertPool()
	var earliest time.Time
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue // as AppendCertsFromPEM does
		}
		pool.AddCert(c)
		if earliest.IsZero() || c.NotAfter.Before(earliest) {
			earliest = c.NotAfter
		}
	}
	if earliest.IsZero() {
		return nil, time.Time{}, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, earliest, nil
}

// NotAfter returns the expiry of pair's certificate (the first of its
// chain): LoadX509KeyPair's Leaf, else the certificate parsed.
func NotAfter(pair tls.Certificate) (time.Time, error) {
	if pair.Leaf != nil {
		return pair.Leaf.NotAfter, nil
	}
	if len(pair.Certificate) == 0 {
		return time.Time{}, errors.New("no certificate")
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return time.Time{}, err
	}
	return c.NotAfter, nil
}

// report calls f.OnLoad, if set, with the expiry of pair (nil: none) and
// caExpiry.
func (f Files) report(pair *tls.Certificate, caExpiry time.Time) {
	if f.OnLoad == nil {
		return
	}
	l := Loaded{CA: caExpiry}
	if pair != nil {
		l.Cert, _ = NotAfter(*pair) // the pair parsed; its leaf does too
	}
	f.OnLoad(l)
}

// ServerTLS returns a server TLS config that serves f.Cert and verifies
// client certificates against f.CA with clientAuth, reading the three
// files again when they change, so a rotated certificate or CA is used
// from the next handshake on without a restart. All three are required.
func ServerTLS(f Files, clientAuth tls.ClientAuthType) (*tls.Config, error) {
	cfg, _, err := serverTLS(f, clientAuth)
	return cfg, err
}

// serverTLS is ServerTLS, also returning what follows the files.
func serverTLS(f Files, clientAuth tls.ClientAuthType) (*tls.Config, *watched[*tls.Config], error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, nil, errors.New("a certificate, its key and a CA are all required")
	}
	w, err := watch(func() (*tls.Config, error) {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		pool, caExpiry, err := loadCA(f.CA)
		if err != nil {
			return nil, err
		}
		f.report(&pair, caExpiry)
		// gRPC needs ALPN h2 on the config the handshake uses.
		return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: clientAuth,
			MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}, nil
	}, f.Cert, f.Key, f.CA)
	if err != nil {
		return nil, nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: clientAuth,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return w.get(), nil
		},
	}, w, nil
}

// clientFiles is what a client config reads from its files.
type clientFiles struct {
	cert *tls.Certificate // nil: no client certificate
	pool *x509.CertPool   // nil: the system's roots
}

// ClientTLS returns a client TLS config that presents f.Cert (if set) and
// verifies servers against f.CA (if set; else the system's roots) for
// serverName (if set; else the host dialed), reading the certificate again
// when its files change.
//
// The CA file is read again too when serverName is set: the config then
// verifies the server's chain itself, in VerifyConnection, against the CA
// read last, exactly as crypto/tls would with RootCAs (a chain to a root,
// for serverName, for server authentication), but with a pool that can
// change. Without serverName the name to verify is the host each dial
// names, which VerifyConnection cannot see for an IP address, so the CA is
// read once, at start.
func ClientTLS(f Files, serverName string) (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("a certificate and its key: both or neither")
	}
	var paths []string
	for _, p := range []string{f.Cert, f.Key, f.CA} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	w, err := watch(func() (clientFiles, error) {
		var cf clientFiles
		if f.Cert != "" {
			pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			if err != nil {
				return cf, err
			}
			cf.cert = &pair
		}
		var caExpiry time.Time
		if f.CA != "" {
			pool, notAfter, err := loadCA(f.CA)
			if err != nil {
				return cf, err
			}
			cf.pool, caExpiry = pool, notAfter
		}
		f.report(cf.cert, caExpiry)
		return cf, nil
	}, paths...)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if f.Cert != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return w.get().cert, nil
		}
	}
	switch {
	case f.CA == "":
	case serverName == "":
		cfg.RootCAs = w.get().pool
	default:
		cfg.InsecureSkipVerify = true // verified below, against the CA in force
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyServer(cs, serverName, w.get().pool)
		}
	}
	return cfg, nil
}

// verifyServer verifies the server's chain as crypto/tls does: to a root
// of pool, for name, for server authentication.
func verifyServer(cs tls.ConnectionState, name string, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	opts := x509.VerifyOptions{
		Roots: pool, DNSName: name, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}
