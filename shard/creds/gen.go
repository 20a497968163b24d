package creds

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority made by NewCA, for `shardlimit dev` and
// tests: it issues the components' and callers' certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a self-signed ECDSA P-256 CA named name, valid from an hour
// ago for validity.
func NewCA(name string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM returns the CA's certificate in PEM.
func (ca *CA) CertPEM() []byte { return ca.pem }

// Pool returns a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Leaf describes a certificate to issue: good for both server and client
// authentication, named by its URIs (the identity, e.g.
// spiffe://shardlimit/router), DNS names and IP addresses.
type Leaf struct {
	// CommonName; default the first URI, else the first DNS name.
	CommonName string
	URIs       []string
	DNSNames   []string
	IPs        []net.IP
	// Validity from now; default 1 year. It starts an hour ago.
	Validity time.Duration
}

// Issue signs a certificate for leaf and returns it and its key in PEM.
func (ca *CA) Issue(leaf Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	if leaf.Validity == 0 {
		leaf.Validity = 365 * 24 * time.Hour
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(leaf.Validity),
		DNSNames: leaf.DNSNames, IPAddresses: leaf.IPs,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, s := range leaf.URIs {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			return nil, nil, fmt.Errorf("uri %q: not an absolute URI", s)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	tmpl.Subject.CommonName = leaf.CommonName
	if tmpl.Subject.CommonName == "" {
		switch {
		case len(leaf.URIs) > 0:
			tmpl.Subject.CommonName = leaf.URIs[0]
		case len(leaf.DNSNames) > 0:
			tmpl.Subject.CommonName = leaf.DNSNames[0]
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// IssuePair issues a certificate for leaf as a tls.Certificate, for tests
// that hold it in memory.
func (ca *CA) IssuePair(leaf Leaf) (tls.Certificate, error) {
	c, k, err := ca.Issue(leaf)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

// Files are the paths of one certificate, its key and the CA that verifies
// the other side.
type Files struct {
	Cert, Key, CA string
	// OnLoad, if set, is called by ServerTLS and ClientTLS with the expiry
	// of what they loaded, each time they load the files: at start, and
	// whenever the files changed and parse again. It must not block.
	OnLoad func(Loaded)
}

// Loaded is the expiry (notAfter) of the certificates a set of Files
// loaded: zero where the set names no such file.
type Loaded struct {
	// Cert is the certificate's (Files.Cert: the first in the file).
	Cert time.Time
	// CA is the earliest among the CA file's certificates: from then on,
	// peers whose chain ends at that one fail to verify.
	CA time.Time
}

// IssueFiles issues a certificate for leaf and writes it to dir as
// name.pem and name-key.pem (mode 0600), beside the CA as ca.pem, which it
// writes if missing. Each file is replaced whole (written aside, then
// renamed), so a reader never sees half of one.
func (ca *CA) IssueFiles(dir, name string, leaf Leaf) (Files, error) {
	f := Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	c, k, err := ca.Issue(leaf)
	if err != nil {
		return Files{}, err
	}
	if _, err := os.Stat(f.CA); errors.Is(err, os.ErrNotExist) {
		if err := WriteFile(f.CA, ca.pem, 0o644); err != nil {
			return Files{}, err
		}
	}
	// The key first: a reader that sees the new certificate finds its key.
	if err := WriteFile(f.Key, k, 0o600); err != nil {
		return Files{}, err
	}
	if err := WriteFile(f.Cert, c, 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}

// WriteFile replaces path with b atomically: written to a temporary file
// in the same directory, then renamed over path.
func WriteFile(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
