package rpctest

import (
	"crypto/tls"
	"testing"

	"github.com/shardlimit/shardlimit/shard/creds"
)

// LocalTLS is a local PKI's TLS for a test server that serves as a router
// does (client certificates verified if given), and for its clients.
type LocalTLS struct {
	Server   *tls.Config // the router certificate
	CAOnly   *tls.Config // a client that verifies the server and holds no certificate
	Operator *tls.Config // a client with the operator's certificate
}

// NewLocalTLS makes a local PKI in a temporary directory of tb and returns
// its TLS configurations.
func NewLocalTLS(tb testing.TB) LocalTLS {
	tb.Helper()
	pki, err := creds.NewLocal(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	var l LocalTLS
	if l.Server, err = creds.ServerTLS(pki.Router, tls.VerifyClientCertIfGiven); err != nil {
		tb.Fatal(err)
	}
	if l.CAOnly, err = creds.ClientTLS(creds.Files{CA: pki.Router.CA}, creds.LocalServerName); err != nil {
		tb.Fatal(err)
	}
	if l.Operator, err = creds.ClientTLS(pki.Operator, creds.LocalServerName); err != nil {
		tb.Fatal(err)
	}
	return l
}
