package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
)

// Security says how a cluster's processes and clients authenticate, in
// one place: secure, as in production. One local PKI gives every
// component its certificate, verified by creds.LocalServerName rather
// than an address (so the certificates hold wherever the processes
// listen), and a grants file makes the routers and the rebalance job
// internal and the operator (the caller's own clients) operator, who may
// check every service.
//
// etcd speaks plain text unless Etcd is set: then it serves TLS only,
// requires a client certificate of its own CA, and each component acts
// as a user of its own (the cluster of `shardlimit dev` and the bench).
type Security struct {
	PKI        *creds.Local
	GrantsFile string
	// Etcd is etcd's own PKI, the components' etcd client certificates
	// among it; nil: etcd in plain text.
	Etcd *creds.LocalEtcd
	// ServiceToken is the file of the demo service's token (Service),
	// and Config the client config file that ctl and the Go client read
	// through $SHARDLIMIT_CONFIG: the first router, its CA and the
	// operator's certificate. Both are made with Etcd only.
	ServiceToken, Config string
}

// Service is the demo service that a cluster over a secure etcd gives a
// token of its own (Security.ServiceToken).
const Service = "shop"

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
	return s, creds.WriteFile(s.GrantsFile, b, 0o644)
}

// Flags returns the security flags of a subcommand: "etcd", "shard",
// "router", "rebalance" or "ctl".
func (s Security) Flags(sub string) []string {
	f, ok := map[string]creds.Files{"shard": s.PKI.Shard, "router": s.PKI.Router, "rebalance": s.PKI.Rebalance, "ctl": s.PKI.Operator}[sub]
	if !ok {
		return nil // etcd
	}
	out := []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA, "--tls-server-name", creds.LocalServerName}
	if sub == "ctl" {
		return out
	}
	return append(append(out, "--grants-file", s.GrantsFile), s.etcdFlags(sub)...)
}

// PlainTextFlags returns the flags of a component ("shard", "router" or
// "rebalance") that serves and calls the others in plain text, without
// authentication (--insecure), over the same etcd as Flags'.
func (s Security) PlainTextFlags(sub string) []string {
	return append([]string{"--insecure"}, s.etcdFlags(sub)...)
}

// etcdFlags returns a component's etcd client certificate flags, none
// when etcd speaks plain text.
func (s Security) etcdFlags(sub string) []string {
	if s.Etcd == nil {
		return nil
	}
	e := map[string]creds.Files{"shard": s.Etcd.Shard, "router": s.Etcd.Router, "rebalance": s.Etcd.Rebalance}[sub]
	return []string{"--etcd-cert", e.Cert, "--etcd-key", e.Key, "--etcd-ca", e.CA}
}

// addService gives the demo service a token, its hash stored in etcd as
// its grant, and writes the client config file for the router at router.
func (s *Security) addService(ctx context.Context, cli *clientv3.Client, layout etcdclient.Layout, router string) error {
	s.ServiceToken, s.Config = filepath.Join(s.PKI.Dir, Service+".token"), filepath.Join(s.PKI.Dir, "client.yaml")
	token, stored, err := auth.NewToken(time.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g := auth.Grant{ID: auth.TokenID(Service), Role: auth.RoleService, Services: []string{Service}, Tokens: []auth.Token{stored}}
	if _, err := grantstore.Modify(ctx, cli, layout, g.ID, func(*auth.Grant) (grantstore.Change, error) {
		return grantstore.Change{Grant: g}, nil
	}); err != nil {
		return fmt.Errorf("store the grant of %s: %w", Service, err)
	}
	if err := creds.WriteFile(s.ServiceToken, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	op := s.PKI.Operator
	cfg := creds.ClientConfig{Router: router, TLSCA: op.CA, TLSCert: op.Cert, TLSKey: op.Key, TLSServerName: creds.LocalServerName}
	if err := cfg.Write(s.Config); err != nil {
		return err
	}
	return os.Chmod(s.PKI.Dir, 0o700)
}

// EtcdUsers maps each component to the etcd user of its client
// certificate in a local PKI (creds.LocalEtcd): the users of a secure
// etcd's authentication, and the defaults of `shardlimit etcd auth`.
func EtcdUsers() map[string]string {
	return map[string]string{etcdclient.Router: creds.EtcdRouterUser, etcdclient.Shard: creds.EtcdShardUser, etcdclient.Rebalance: creds.EtcdRebalanceUser}
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
