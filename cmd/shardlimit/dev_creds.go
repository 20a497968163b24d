package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	grantsFile   string
	serviceToken string // path of the demo service's token file
	config       string // path of the client config file
}

// devCredentials makes dev's credentials in dir/credentials and stores the
// demo service's grant, with its token's hash, in etcd.
func devCredentials(ctx context.Context, dir, endpoint string, o devOptions) (*devSecurity, error) {
	pki, err := creds.NewLocal(filepath.Join(dir, "credentials"))
	if err != nil {
		return nil, err
	}
	s := &devSecurity{pki: pki, grantsFile: filepath.Join(pki.Dir, "grants.yaml"),
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
	cli, err := etcdclient.Dial([]string{endpoint}, nil)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
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

// args returns a component's command line with its certificate f and the
// grants file.
func (s *devSecurity) args(f creds.Files, sub string, args ...string) []string {
	return append([]string{sub, "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA,
		"--tls-server-name", creds.LocalServerName, "--grants-file", s.grantsFile}, args...)
}
