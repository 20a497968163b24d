package faults

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/cmd/bench"
	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// security says how the suite's processes and clients authenticate, in
// one place: secure, as in production. One local PKI (the one `shardlimit
// dev` makes) gives every component its certificate, and a grants file
// makes the routers and the rebalance job internal and the suite's own
// clients the operator, who may check every service.
type security struct {
	pki        *creds.Local
	grantsFile string
}

// newSecurity makes the PKI and the grants file in a new directory under
// dir.
func newSecurity(dir string) (security, error) {
	pki, err := creds.NewLocal(filepath.Join(dir, "credentials"))
	if err != nil {
		return security{}, err
	}
	b, err := yaml.Marshal(auth.File{Grants: pki.Grants()})
	if err != nil {
		return security{}, err
	}
	s := security{pki: pki, grantsFile: filepath.Join(pki.Dir, "grants.yaml")}
	return s, os.WriteFile(s.grantsFile, b, 0o644)
}

// flags returns the security flags of a subcommand: "etcd", "shard",
// "router", "rebalance" or "ctl".
func (s security) flags(sub string) []string {
	var f creds.Files
	switch sub {
	case "shard":
		f = s.pki.Shard
	case "router":
		f = s.pki.Router
	case "rebalance":
		f = s.pki.Rebalance
	case "ctl":
		f = s.pki.Operator
		return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA, "--tls-server-name", creds.LocalServerName}
	default:
		return nil // etcd: the suite's etcd speaks plain text on 127.0.0.1
	}
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA,
		"--tls-server-name", creds.LocalServerName, "--grants-file", s.grantsFile}
}

// operatorTLS is the client TLS of the suite's own callers.
func (s security) operatorTLS() *tls.Config {
	cfg, err := creds.ClientTLS(s.pki.Operator, creds.LocalServerName)
	if err != nil {
		panic(fmt.Sprintf("operator TLS from files just written: %v", err))
	}
	return cfg
}

// client sets the Go client's credentials towards the routers.
func (s security) client(o *client.Options) { o.TLS = s.operatorTLS() }

// bench sets the bench's credentials towards the routers.
func (s security) bench(o *bench.Options) { o.TLS = s.operatorTLS() }

// etcdTLS is the TLS of the suite's own etcd client; nil: plain text.
func (s security) etcdTLS() *tls.Config { return nil }
