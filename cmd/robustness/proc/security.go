package proc

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// Security says how a test cluster's processes and clients authenticate,
// in one place: secure, as in production. One local PKI (the one
// `shardlimit dev` makes) gives every component its certificate, verified
// by creds.LocalServerName rather than an address (so the certificates
// hold wherever the processes listen), and a grants file makes the
// routers and the rebalance job internal and the test's own clients the
// operator, who may check every service. etcd speaks plain text.
type Security struct {
	PKI        *creds.Local
	GrantsFile string
}

// NewSecurity makes the PKI and the grants file under dir.
func NewSecurity(dir string) (Security, error) {
	pki, err := creds.NewLocal(filepath.Join(dir, "credentials"))
	if err != nil {
		return Security{}, err
	}
	b, err := yaml.Marshal(auth.File{Grants: pki.Grants()})
	if err != nil {
		return Security{}, err
	}
	s := Security{PKI: pki, GrantsFile: filepath.Join(pki.Dir, "grants.yaml")}
	return s, os.WriteFile(s.GrantsFile, b, 0o644)
}

// Flags returns the security flags of a subcommand: "etcd", "shard",
// "router", "rebalance" or "ctl".
func (s Security) Flags(sub string) []string {
	var f creds.Files
	switch sub {
	case "shard":
		f = s.PKI.Shard
	case "router":
		f = s.PKI.Router
	case "rebalance":
		f = s.PKI.Rebalance
	case "ctl":
		f = s.PKI.Operator
		return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA, "--tls-server-name", creds.LocalServerName}
	default:
		return nil // etcd: plain text
	}
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA,
		"--tls-server-name", creds.LocalServerName, "--grants-file", s.GrantsFile}
}

// OperatorTLS is the client TLS of the test's own callers.
func (s Security) OperatorTLS() *tls.Config {
	cfg, err := creds.ClientTLS(s.PKI.Operator, creds.LocalServerName)
	if err != nil {
		panic(fmt.Sprintf("operator TLS from files just written: %v", err))
	}
	return cfg
}

// Kit is the shardlimit binary and the PKI that a test binary's clusters
// run with, made once, on first use, in a directory of its own (not a
// test's TempDir: they outlive the first test that asks).
type Kit struct {
	once sync.Once
	dir  string
	bin  string
	sec  Security
	err  error
}

// Get builds pkg (as `go build` names it, relative to the test's
// directory; or takes prebuilt when set) and makes the PKI, the first
// time; later calls return the same.
func (k *Kit) Get(prebuilt, pkg string) (string, Security, error) {
	k.once.Do(func() {
		if k.dir, k.err = os.MkdirTemp("", "shardlimit-test-"); k.err != nil {
			return
		}
		if k.sec, k.err = NewSecurity(k.dir); k.err != nil {
			return
		}
		if k.bin = prebuilt; k.bin != "" {
			return
		}
		k.bin = filepath.Join(k.dir, "shardlimit")
		if out, err := exec.Command("go", "build", "-o", k.bin, pkg).CombinedOutput(); err != nil {
			k.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	return k.bin, k.sec, k.err
}

// Remove removes what Get made; TestMain calls it after the tests.
func (k *Kit) Remove() {
	if k.dir != "" {
		_ = os.RemoveAll(k.dir)
	}
}
