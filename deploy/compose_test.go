package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// This file parses envoy/compose.yaml, alone and with envoy/compose.tls.yaml
// merged in as `docker compose -f compose.yaml -f compose.tls.yaml` does,
// strictly into the Compose fields the example uses, and checks that the
// services fit together: every shardlimit command line's flags exist in the
// binary (flagErrors, as for the Kubernetes manifests), addresses name
// services and their listen ports, mounted files exist, Envoy reads the
// document it is given, and the TLS files are mounted where the flags and
// envoy-tls.yaml look for them. Docker does not run here: the images are
// not pulled nor the containers started.

const (
	composeDir  = "envoy"
	composeFile = "envoy/compose.yaml"
	composeTLS  = "envoy/compose.tls.yaml"
	// certsDir is gen-certs.sh's output directory in the TLS example; it is
	// made by the steps in compose.tls.yaml, so it need not exist.
	certsDir = "./certs"
)

// compose is the part of the Compose specification the example uses.
type compose struct {
	Name string `yaml:"name,omitempty"`
	// XShardlimit holds the settings every shardlimit service merges in
	// (<<: *shardlimit).
	XShardlimit *composeService            `yaml:"x-shardlimit,omitempty"`
	Services    map[string]*composeService `yaml:"services"`
}

type composeService struct {
	Image string `yaml:"image,omitempty"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile,omitempty"`
	} `yaml:"build,omitempty"`
	Restart string   `yaml:"restart,omitempty"`
	Command []string `yaml:"command,omitempty"`
	Ports   []string `yaml:"ports,omitempty"`
	Volumes []string `yaml:"volumes,omitempty"`
	Tmpfs   []string `yaml:"tmpfs,omitempty"`
	// StopGracePeriod is a duration; the shards' fits their --drain-timeout.
	StopGracePeriod string `yaml:"stop_grace_period,omitempty"`
	DependsOn       map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on,omitempty"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval,omitempty"`
		Timeout  string   `yaml:"timeout,omitempty"`
		Retries  int      `yaml:"retries,omitempty"`
	} `yaml:"healthcheck,omitempty"`
}

var (
	composeRestart = regexp.MustCompile(`^(no|always|unless-stopped|on-failure(:[1-9][0-9]*)?)$`)
	composePort    = regexp.MustCompile(`^((\d+\.\d+\.\d+\.\d+):)?(\d+):(\d+)$`)
	composeVolume  = regexp.MustCompile(`^(\./[^:]*):(/[^:]*)(:ro)?$`)
	envoyImage     = regexp.MustCompile(`^envoyproxy/envoy:v1\.3\d\.\d+$`)
)

// loadCompose parses a Compose file strictly (an unknown field fails) and
// checks the values whose form Compose fixes.
func loadCompose(doc []byte) (*compose, error) {
	c := &compose{}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, err
	}
	var errs []error
	for name, s := range c.Services {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("service %s: %s", name, fmt.Sprintf(format, args...)))
		}
		if s.Restart != "" && !composeRestart.MatchString(s.Restart) {
			bad("restart %q", s.Restart)
		}
		for _, p := range s.Ports {
			if !composePort.MatchString(p) {
				bad("port %q is not [IP:]HOST:CONTAINER", p)
			}
		}
		for _, v := range s.Volumes {
			if !composeVolume.MatchString(v) {
				bad("volume %q is not ./SOURCE:/TARGET[:ro]", v)
			}
		}
		for dep, d := range s.DependsOn {
			if !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition) {
				bad("depends_on %s: condition %q", dep, d.Condition)
			}
		}
	}
	return c, errors.Join(errs...)
}

// mergeCompose returns base with override merged in as Compose merges
// files: a command replaces the service's, volumes are added (one with the
// same target replaces it). The override may set nothing else.
func mergeCompose(base, override *compose) (*compose, error) {
	out := &compose{Name: base.Name, XShardlimit: base.XShardlimit, Services: map[string]*composeService{}}
	for name, s := range base.Services {
		c := *s
		out.Services[name] = &c
	}
	var errs []error
	for name, o := range override.Services {
		s := out.Services[name]
		if s == nil {
			errs = append(errs, fmt.Errorf("service %s: not in the base file", name))
			continue
		}
		if rest := (composeService{Image: o.Image, Build: o.Build, Restart: o.Restart, Ports: o.Ports, Tmpfs: o.Tmpfs, DependsOn: o.DependsOn, Healthcheck: o.Healthcheck}); !reflect.DeepEqual(rest, composeService{}) {
			errs = append(errs, fmt.Errorf("service %s: the override sets more than command and volumes, which this test does not merge", name))
		}
		if o.Command != nil {
			s.Command = o.Command
		}
		vols := slices.Clone(s.Volumes)
		for _, v := range o.Volumes {
			i := slices.IndexFunc(vols, func(b string) bool { _, bt := volume(b); _, ot := volume(v); return bt == ot })
			if i >= 0 {
				vols[i] = v
			} else {
				vols = append(vols, v)
			}
		}
		s.Volumes = vols
	}
	return out, errors.Join(errs...)
}

// volume splits a bind mount into its source and target.
func volume(v string) (source, target string) {
	m := composeVolume.FindStringSubmatch(v)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// mountSource returns the host path that s sees at target: the source of
// the mount at target, or of a mount at a directory above it joined with
// the rest of the path.
func mountSource(s *composeService, target string) (source string, ok bool) {
	for _, v := range s.Volumes {
		src, dst := volume(v)
		if target == dst {
			return src, true
		}
		if rel, found := strings.CutPrefix(target, dst+"/"); found {
			return src + "/" + rel, true
		}
	}
	return "", false
}

// composeFlag returns the value of --name=value in a command.
func composeFlag(cmd []string, name string) string {
	v, _ := flagValue(cmd, name)
	return v
}

// hostPort splits an address, failing the test when it is not host:port.
func hostPort(t *testing.T, where, addr string) (string, int) {
	t.Helper()
	addr = strings.TrimPrefix(addr, "http://")
	h, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		t.Errorf("%s: %q is not host:port", where, addr)
	}
	return h, port
}

// checkCompose checks one configuration of the example; it returns its
// shardlimit command lines.
func checkCompose(t *testing.T, where string, c *compose, envoyDoc string, tls bool) []invocation {
	t.Helper()
	var invs []invocation
	bySub := map[string][]string{} // subcommand → services running it
	for _, name := range slices.Sorted(maps.Keys(c.Services)) {
		s := c.Services[name]
		w := where + ": service " + name
		if s.Image == "" {
			t.Errorf("%s: no image", w)
		}
		for dep := range s.DependsOn {
			if c.Services[dep] == nil {
				t.Errorf("%s: depends on %s, which is no service", w, dep)
			}
		}
		for _, v := range s.Volumes {
			src, _ := volume(v)
			if src == certsDir && tls {
				continue
			}
			if _, err := os.Stat(filepath.Join(composeDir, src)); err != nil {
				t.Errorf("%s: mounts %s: %v", w, src, err)
			}
		}
		if !isShardlimitImage(s.Image) {
			continue
		}
		if s.Build == nil || filepath.Join(composeDir, s.Build.Context) != ".." || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s: the shardlimit image is built from the repository root with deploy/Dockerfile", w)
		}
		inv := invocation{w, s.Command}
		invs = append(invs, inv)
		bySub[inv.sub()] = append(bySub[inv.sub()], name)
		// Every component finds etcd.
		if e := composeFlag(s.Command, "etcd"); e != "" {
			if h, p := hostPort(t, w+": --etcd", e); c.Services[h] == nil || p != 2379 {
				t.Errorf("%s: --etcd=%s is not the etcd service's client port", w, e)
			}
		}
		// Shards and the rebalance instance advertise their own name and
		// listen port.
		if a := composeFlag(s.Command, "advertise"); a != "" {
			h, p := hostPort(t, w+": --advertise", a)
			if _, lp := hostPort(t, w+": --listen", composeFlag(s.Command, "listen")); h != name || p != lp {
				t.Errorf("%s: --advertise=%s, want %s:<--listen's port>", w, a, name)
			}
		}
		// TLS files are mounted from gen-certs.sh's directory, under the
		// names it gives them.
		for _, f := range []string{"tls-cert", "tls-key", "tls-ca"} {
			p := composeFlag(s.Command, f)
			if tls != (p != "") {
				t.Errorf("%s: --%s=%q in the %s example", w, f, p, map[bool]string{true: "TLS", false: "plain"}[tls])
			}
			if p == "" {
				continue
			}
			src, ok := mountSource(s, p)
			own := map[string]string{"router": "router", "shard": "shard", "rebalance": "rebalance", "ctl rules apply": "operator"}[inv.sub()]
			if !ok || !slices.Contains([]string{certsDir + "/" + own + ".crt", certsDir + "/" + own + ".key", certsDir + "/shardlimit-ca.crt"}, src) {
				t.Errorf("%s: --%s=%s is not mounted from gen-certs.sh's %s/{%s.crt,%s.key,shardlimit-ca.crt}", w, f, p, certsDir, own, own)
			}
		}
	}
	requireSubcommands(t, invs, "router", "shard", "rebalance", "ctl rules apply")
	if len(bySub["router"]) != 1 || len(bySub["ctl rules apply"]) != 1 {
		t.Fatalf("%s: want one router and one rules service, have %v", where, bySub)
	}
	router := bySub["router"][0]
	_, routerPort := hostPort(t, where+": router --listen", composeFlag(c.Services[router].Command, "listen"))

	// The rules service applies rules.yaml through the router.
	rulesSvc := c.Services[bySub["ctl rules apply"][0]]
	if h, p := hostPort(t, where+": ctl --router", composeFlag(rulesSvc.Command, "router")); h != router || p != routerPort {
		t.Errorf("%s: ctl --router=%s:%d, want %s:%d", where, h, p, router, routerPort)
	}
	if src, ok := mountSource(rulesSvc, composeFlag(rulesSvc.Command, "file")); !ok || path.Clean(src) != path.Base(envoyRulesFile) {
		t.Errorf("%s: ctl rules apply --file=%s is not %s", where, composeFlag(rulesSvc.Command, "file"), envoyRulesFile)
	}

	// Envoy reads envoyDoc, whose router cluster dials the router service.
	var envoySvc *composeService
	for _, s := range c.Services {
		if envoyImage.MatchString(s.Image) {
			envoySvc = s
		}
	}
	if envoySvc == nil {
		t.Fatalf("%s: no service runs %s", where, envoyImage)
	}
	i := slices.Index(envoySvc.Command, "-c")
	if i < 0 || i+1 >= len(envoySvc.Command) {
		t.Fatalf("%s: Envoy's command %v has no -c FILE", where, envoySvc.Command)
	}
	if src, ok := mountSource(envoySvc, envoySvc.Command[i+1]); !ok || src != "./"+path.Base(envoyDoc) {
		t.Fatalf("%s: Envoy reads %s, mounted from %q, want ./%s", where, envoySvc.Command[i+1], src, path.Base(envoyDoc))
	}
	ex := loadExample(t, envoyDoc)
	sa := ex.clusters[routerCluster].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != router || int(sa.GetPortValue()) != routerPort {
		t.Errorf("%s: %s's %s cluster dials %s:%d, want %s:%d", where, envoyDoc, routerCluster, sa.GetAddress(), sa.GetPortValue(), router, routerPort)
	}
	if ctx := routerTLS(t, envoyDoc, ex.clusters[routerCluster]); ctx != nil {
		cert, key, ca := tlsFiles(ctx)
		for _, f := range []string{cert, key, ca} {
			if src, ok := mountSource(envoySvc, f); !ok || path.Dir(src) != path.Clean(certsDir) {
				t.Errorf("%s: Envoy reads %s, not mounted from %s", where, f, certsDir)
			}
		}
	}
	return invs
}

func TestComposeExample(t *testing.T) {
	base, err := loadCompose(readExample(t, composeFile))
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	override, err := loadCompose(readExample(t, composeTLS))
	if err != nil {
		t.Fatalf("%s: %v", composeTLS, err)
	}
	withTLS, err := mergeCompose(base, override)
	if err != nil {
		t.Fatalf("%s: %v", composeTLS, err)
	}
	invs := checkCompose(t, composeFile, base, "envoy/envoy.yaml", false)
	invs = append(invs, checkCompose(t, composeFile+" + "+composeTLS, withTLS, "envoy/envoy-tls.yaml", true)...)

	// etcd is the image the Kubernetes manifests run.
	r := render(t, "k8s/etcd")
	if len(r.statefulSets) != 1 {
		t.Fatalf("k8s/etcd renders %d StatefulSets, want 1", len(r.statefulSets))
	}
	want := r.statefulSets[0].Spec.Template.Spec.Containers[0].Image
	if etcd := base.Services["etcd"]; etcd == nil || etcd.Image != want {
		t.Errorf("%s: no service etcd running %s as k8s/etcd does", composeFile, want)
	}

	for _, err := range flagErrors(shardlimitBinary(t), invs, strings.NewReplacer()) {
		t.Error(err)
	}
}
