package deploy

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// This file checks what keeps etcd for components only: each component
// reaches etcd with a client certificate of its own, the
// shardlimit-etcd-auth Job turns etcd's authentication on for the same key
// prefix the components use (its roles are the code's etcd.Layout.Writes,
// so they follow the layout), and NetworkPolicies let each pod be reached
// only by the peers that call it.

// defaultPrefix is the components' --prefix when the manifests leave it.
const defaultPrefix = "/shardlimit/"

// mountedSecret returns the secret mounted at the directory of path in
// the pod, or "".
func mountedSecret(pod *corev1.PodTemplateSpec, c corev1.Container, path string) string {
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			for _, v := range pod.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					return v.Secret.SecretName
				}
			}
		}
	}
	return ""
}

// checkEtcdClients: routers, shards and the rebalance job each present the
// etcd client certificate of their own secret (shardlimit-etcd-<component>-tls),
// agree on the prefix, and where the render runs etcd, it requires client
// certificates and the auth Job acts as root on that prefix with the
// default users.
func checkEtcdClients(t *testing.T, r *rendered, ws []workload) {
	t.Helper()
	prefixes := map[string]bool{}
	var authJob []string // the args of `shardlimit etcd auth`
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isShardlimitImage(c.Image) || len(c.Args) == 0 {
				continue
			}
			where := w.kind + " " + w.name + " container " + c.Name
			sub := c.Args[0]
			if sub == "etcd" && len(c.Args) > 1 && c.Args[1] == "auth" {
				authJob = c.Args[2:]
				cert, _ := flagValue(authJob, "etcd-cert")
				if got := mountedSecret(w.pod, c, cert); got != "shardlimit-etcd-root-tls" {
					t.Errorf("%s: --etcd-cert %s from secret %q, want shardlimit-etcd-root-tls", where, cert, got)
				}
				continue
			}
			if !slices.Contains(etcd.Components, sub) {
				continue
			}
			cert, ok := flagValue(c.Args, "etcd-cert")
			if want := "shardlimit-etcd-" + sub + "-tls"; !ok || mountedSecret(w.pod, c, cert) != want {
				t.Errorf("%s: --etcd-cert %q is not from its own secret %s", where, cert, want)
			}
			p, ok := flagValue(c.Args, "prefix")
			if !ok {
				p = defaultPrefix
			}
			prefixes[p] = true
		}
	}
	if len(prefixes) > 1 {
		t.Errorf("the components use different etcd prefixes: %v", prefixes)
	}
	i := slices.IndexFunc(r.statefulSets, func(s *appsv1.StatefulSet) bool { return s.Name == "shardlimit-etcd" })
	if i >= 0 && !slices.Contains(r.statefulSets[i].Spec.Template.Spec.Containers[0].Args, "--client-cert-auth") {
		t.Errorf("etcd runs without --client-cert-auth: a client certificate's common name is no user")
	}
	if len(prefixes) == 0 {
		return // no component in this render (k8s/etcd alone)
	}
	if authJob == nil {
		t.Errorf("no Job runs `shardlimit etcd auth`: etcd's authentication stays off")
		return
	}
	p, ok := flagValue(authJob, "prefix")
	if !ok {
		p = defaultPrefix
	}
	if !prefixes[p] {
		t.Errorf("the auth Job gives roles under %s, the components use %v", p, prefixes)
	}
	for _, c := range etcd.Components {
		if u, ok := flagValue(authJob, c+"-user"); ok {
			t.Errorf("the auth Job names the %s user %s: keep the default, the common name gen-certs.sh gives", c, u)
		}
	}
	// What each role may write, by the layout the Job's roles come from:
	// every kind of key the cluster writes has exactly its writers.
	l := etcd.Layout(p)
	for key, writers := range map[string][]string{
		l.Member("shard-0"): {etcd.Shard, etcd.Rebalance}, l.Rule("s", "r"): {etcd.Router}, l.Grant("id"): {etcd.Router},
		l.UnreachableReport("shard-0", "1"): {etcd.Router}, l.Eviction("shard-0"): {etcd.Rebalance}, l.EvictionAck("shard-0"): {etcd.Shard},
		l.ShardMap(): {etcd.Router, etcd.Shard, etcd.Rebalance}, l.ShardMapVersion(1): {etcd.Rebalance}, l.Run(1): {etcd.Rebalance},
		l.ElectionCandidates() + "1": {etcd.Rebalance}, l.HandoffLock() + "/1": {etcd.Shard, etcd.Rebalance},
	} {
		var got []string
		for _, c := range etcd.Components {
			if l.MayWrite(c, key) {
				got = append(got, c)
			}
		}
		sort.Strings(got)
		sort.Strings(writers)
		if !slices.Equal(got, writers) {
			t.Errorf("%s may be written by %v, want %v", key, got, writers)
		}
	}
}

// gen-certs.sh issues each component's etcd client certificate to the
// common name `shardlimit etcd auth` makes its user by default, and
// root's to root.
func TestGenCertsEtcdUsers(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	dir := t.TempDir()
	if out, err := exec.Command("bash", filepath.Join("k8s", "gen-certs.sh"), "shardlimit", dir).CombinedOutput(); err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, out)
	}
	for file, want := range map[string]string{"etcd-router": creds.EtcdRouterUser, "etcd-shard": creds.EtcdShardUser,
		"etcd-rebalance": creds.EtcdRebalanceUser, "etcd-root": etcd.RootUser} {
		b, err := os.ReadFile(filepath.Join(dir, file+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s.crt: no PEM", file)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject.CommonName != want {
			t.Errorf("%s.crt: common name %q, want %q (its etcd user)", file, c.Subject.CommonName, want)
		}
		if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			t.Errorf("%s.crt: not for client authentication", file)
		}
	}
}

// peerAny is a rule's peer when it names none: any caller.
const peerAny = "any"

// peerMonitoring is the namespace Prometheus scrapes from.
const peerMonitoring = "namespace monitoring"

// wantIngress is, by component (the pods' app.kubernetes.io/component),
// who may open a connection to which named port: nothing else reaches
// them.
var wantIngress = map[string]map[string][]string{
	"router":    {"grpc": {peerAny}, "http": {peerAny}, "metrics": {peerMonitoring}},
	"shard":     {"grpc": {"rebalance", "router", "shard"}, "metrics": {peerMonitoring}},
	"rebalance": {"grpc": {"router"}, "metrics": {peerMonitoring}},
	"etcd":      {"client": {"etcd-auth", "rebalance", "router", "shard"}, "peer": {"etcd"}, "metrics": {peerMonitoring}},
}

// checkNetworkPolicies: every long-running pod of the render is selected
// by exactly one NetworkPolicy, whose ingress rules admit wantIngress and
// no more, on ports the pod declares, from peers the render runs.
func checkNetworkPolicies(t *testing.T, r *rendered, ws []workload) {
	t.Helper()
	for _, w := range ws {
		if w.kind == "Job" {
			continue
		}
		where := w.kind + " " + w.name
		comp := w.pod.Labels["app.kubernetes.io/component"]
		want, ok := wantIngress[comp]
		if !ok {
			t.Errorf("%s: component %q has no expected ingress in this test: add one", where, comp)
			continue
		}
		var selecting []*networkingv1.NetworkPolicy
		for _, np := range r.networkPolicies {
			if selects(&np.Spec.PodSelector, w) {
				selecting = append(selecting, np)
			}
		}
		if len(selecting) != 1 {
			t.Errorf("%s: selected by %d NetworkPolicies, want 1", where, len(selecting))
			continue
		}
		np := selecting[0]
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			t.Errorf("NetworkPolicy %s: no Ingress policy type", np.Name)
		}
		got := map[string][]string{}
		for _, rule := range np.Spec.Ingress {
			var peers []string
			for _, p := range rule.From {
				switch {
				case p.NamespaceSelector != nil && p.PodSelector == nil:
					peers = append(peers, "namespace "+p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				case p.PodSelector != nil && p.NamespaceSelector == nil && p.IPBlock == nil:
					peer := p.PodSelector.MatchLabels["app.kubernetes.io/component"]
					if _, ok := wantIngress[peer]; !ok && peer != "etcd-auth" {
						t.Errorf("NetworkPolicy %s: admits component %q, which shardlimit does not run", np.Name, peer)
					}
					peers = append(peers, peer)
				default:
					t.Errorf("NetworkPolicy %s: a peer that is neither one component's pods nor a namespace: %+v", np.Name, p)
				}
			}
			if len(rule.From) == 0 {
				peers = []string{peerAny}
			}
			if len(rule.Ports) == 0 {
				t.Errorf("NetworkPolicy %s: a rule with no ports admits %v to every port", np.Name, peers)
			}
			for _, port := range rule.Ports {
				name := port.Port.String()
				if port.Port == nil || port.Port.StrVal == "" || !hasPort(w.pod, name) {
					t.Errorf("NetworkPolicy %s: port %s is not a named port of %s", np.Name, name, where)
					continue
				}
				got[name] = append(got[name], peers...)
			}
		}
		for port := range got {
			sort.Strings(got[port])
		}
		for port, peers := range want {
			if !slices.Equal(got[port], peers) {
				t.Errorf("NetworkPolicy %s: port %s admits %v, want %v", np.Name, port, got[port], peers)
			}
		}
		for port, peers := range got {
			if _, ok := want[port]; !ok {
				t.Errorf("NetworkPolicy %s: port %s admits %v, want nobody", np.Name, port, peers)
			}
		}
	}
}
