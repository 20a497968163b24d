package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
)

// devService is the demo service that dev gives a token of its own.
const devService = "shop"

// devSecurity is what dev makes so that its cluster runs secure: a CA and
// the components' and the operator's certificates, the grants file of the
// internal identities and the operator, the demo service's token, and the
// client config file that ctl and the Go client read.
type devSecurity struct {
	pki          *creds.Local
	etcd         *creds.LocalEtcd // etcd's own PKI: the components' etcd client certificates
	grantsFile   string
	serviceToken string // path of the demo service's token file
	config       string // path of the client config file
}

// devCredentials makes dev's credentials in dir/credentials and stores the
// demo service's grant, with its token's hash, in etcd.
func devCredentials(ctx context.Context, dir string, cli *clientv3.Client, etcdPKI *creds.LocalEtcd, o devOptions) (*devSecurity, error) {
	pki, err := creds.NewLocal(filepath.Join(dir, "credentials"))
	if err != nil {
		return nil, err
	}
	s := &devSecurity{pki: pki, etcd: etcdPKI, grantsFile: filepath.Join(pki.Dir, "grants.yaml"),
		serviceToken: filepath.Join(pki.Dir, devService+".token"), config: filepath.Join(pki.Dir, "client.yaml")}
	b, err := yaml.Marshal(auth.File{Grants: pki.Grants()})
	if err != nil {
		return nil, err
	}
	if err := creds.WriteFile(s.grantsFile, b, 0o644); err != nil {
		return nil, err
	}
	token, stored, err := auth.NewToken(time.Now())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g := auth.Grant{ID: auth.TokenID(devService), Role: auth.RoleService, Services: []string{devService}, Tokens: []auth.Token{stored}}
	if _, err := grantstore.Modify(ctx, cli, etcdclient.Layout(o.prefix), g.ID, func(*auth.Grant) (grantstore.Change, error) {
		return grantstore.Change{Grant: g}, nil
	}); err != nil {
		return nil, fmt.Errorf("store the grant of %s: %w", devService, err)
	}
	if err := creds.WriteFile(s.serviceToken, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	cfg := creds.ClientConfig{Router: o.routerListen, TLSCA: pki.Operator.CA, TLSCert: pki.Operator.Cert, TLSKey: pki.Operator.Key, TLSServerName: creds.LocalServerName}
	if err := cfg.Write(s.config); err != nil {
		return nil, err
	}
	return s, os.Chmod(pki.Dir, 0o700)
}

// args returns a component's command line with its certificate f, its
// etcd client certificate e and the grants file.
func (s *devSecurity) args(f, e creds.Files, sub string, args ...string) []string {
	return append([]string{sub, "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA,
		"--tls-server-name", creds.LocalServerName, "--grants-file", s.grantsFile,
		"--etcd-cert", e.Cert, "--etcd-key", e.Key, "--etcd-ca", e.CA}, args...)
}

// devEtcdRoot returns a client of dev's etcd at endpoint acting as root,
// once it turned etcd's authentication on with a role per component
// (etcdclient.EnableAuth): the client dev stores the rules and grants with
// and watches the cluster start through.
func devEtcdRoot(ctx context.Context, endpoint string, pki *creds.LocalEtcd, prefix string) (*clientv3.Client, error) {
	tlsCfg, err := creds.ClientTLS(pki.Root, "")
	if err != nil {
		return nil, fmt.Errorf("etcd root certificate: %w", err)
	}
	cli, err := etcdclient.Dial([]string{endpoint}, tlsCfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := etcdclient.EnableAuth(ctx, cli, etcdclient.Layout(prefix), etcdUsers()); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// requireLoopback fails unless addr's host is a loopback address (or
// "localhost"), or any says another is fine (the flag named anyFlag).
func requireLoopback(flag, addr string, any bool, anyFlag string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("%s: %v", flag, err)
	}
	if any || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usageErrorf("%s: %q is not a loopback address: other machines could reach etcd, which holds every grant and rule; %s allows it", flag, addr, anyFlag)
}

// dialable returns the address to dial a server listening on addr: the
// loopback address for an unspecified host (0.0.0.0, ::).
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
