package creds

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// The identities of the components' and the operator's certificates that
// `shardlimit dev` and test clusters issue (SAN URIs), and that the
// Kubernetes manifests ask for.
const (
	RouterID    = "spiffe://shardlimit/router"
	ShardID     = "spiffe://shardlimit/shard"
	RebalanceID = "spiffe://shardlimit/rebalance"
	OperatorID  = "spiffe://shardlimit/operator"
)

// LocalServerName is the name every certificate of a Local PKI holds
// besides 127.0.0.1, and that its clients verify (so that they follow a
// rotated CA, see ClientTLS).
const LocalServerName = "localhost"

// Local is a PKI for one machine, written in a directory: a CA and the
// certificates of the router, the shards, the rebalance job and an
// operator, each for 127.0.0.1 and localhost. `shardlimit dev` and test
// clusters make one.
type Local struct {
	Dir                                string
	CA                                 *CA
	Router, Shard, Rebalance, Operator Files
}

// NewLocal makes a Local PKI in dir, which it creates.
func NewLocal(dir string) (*Local, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("shardlimit local CA", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	l := &Local{Dir: dir, CA: ca}
	for _, c := range []struct {
		f    *Files
		name string
		uri  string
	}{
		{&l.Router, "router", RouterID},
		{&l.Shard, "shard", ShardID},
		{&l.Rebalance, "rebalance", RebalanceID},
		{&l.Operator, "operator", OperatorID},
	} {
		if *c.f, err = l.Issue(c.name, c.uri); err != nil {
			return nil, fmt.Errorf("%s certificate: %w", c.name, err)
		}
	}
	return l, nil
}

// Issue issues a certificate named name.pem in the PKI's directory for
// identity uri (none when ""), 127.0.0.1 and localhost.
func (l *Local) Issue(name, uri string) (Files, error) {
	leaf := Leaf{DNSNames: []string{LocalServerName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, CommonName: name}
	if uri != "" {
		leaf.URIs = []string{uri}
	}
	return l.CA.IssueFiles(l.Dir, name, leaf)
}

// Grants are the grants a Local PKI's cluster starts with: the router, the
// rebalance job and the shards internal (shards pull counters from each
// other when they join and drain), the operator certificate operator.
func (l *Local) Grants() []auth.Grant {
	return []auth.Grant{
		{ID: RouterID, Role: auth.RoleInternal},
		{ID: RebalanceID, Role: auth.RoleInternal},
		{ID: ShardID, Role: auth.RoleInternal},
		{ID: OperatorID, Role: auth.RoleOperator},
	}
}

// The common names of a LocalEtcd's component client certificates (root's
// is etcd.RootUser). An etcd with --client-cert-auth and its
// authentication enabled takes a client certificate's common name as the
// user it acts as.
const (
	EtcdRouterUser    = "shardlimit-router"
	EtcdShardUser     = "shardlimit-shard"
	EtcdRebalanceUser = "shardlimit-rebalance"
)

// LocalEtcd is the PKI of one machine's etcd, apart from Local's so that
// a component certificate is no etcd credential and the other way round:
// its own CA, the server's certificate and one client certificate per
// component and for root (the user that sets etcd's authentication up),
// written in a directory. `shardlimit dev` makes one.
type LocalEtcd struct {
	Dir                                    string
	Server, Root, Router, Shard, Rebalance Files
}

// LocalEtcdClient returns the files of user's client certificate in the
// directory of a LocalEtcd PKI (dev's: its credentials directory's etcd/),
// for a process of one's own beside dev's components.
func LocalEtcdClient(dir, user string) Files {
	return Files{Cert: filepath.Join(dir, user+".pem"), Key: filepath.Join(dir, user+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
}

// NewLocalEtcd makes a LocalEtcd PKI in dir, which it creates. The
// server's certificate holds 127.0.0.1 and localhost, and each of hosts
// (an IP address or a DNS name) that clients may dial besides.
func NewLocalEtcd(dir string, hosts ...string) (*LocalEtcd, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("shardlimit local etcd CA", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	server := Leaf{CommonName: "etcd", DNSNames: []string{LocalServerName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPs = append(server.IPs, ip)
		} else if h != "" {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	l := &LocalEtcd{Dir: dir}
	if l.Server, err = ca.IssueFiles(dir, "server", server); err != nil {
		return nil, fmt.Errorf("etcd server certificate: %w", err)
	}
	for _, c := range []struct {
		f    *Files
		user string
	}{
		{&l.Root, etcd.RootUser},
		{&l.Router, EtcdRouterUser},
		{&l.Shard, EtcdShardUser},
		{&l.Rebalance, EtcdRebalanceUser},
	} {
		if *c.f, err = ca.IssueFiles(dir, c.user, Leaf{CommonName: c.user}); err != nil {
			return nil, fmt.Errorf("etcd client certificate %s: %w", c.user, err)
		}
	}
	return l, nil
}
