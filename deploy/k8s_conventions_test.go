package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kustypes "sigs.k8s.io/kustomize/api/types"
)

// This file checks the manifests against Kubernetes' conventions for
// workloads: an identity per component that mounts no API token, an image
// tag set in one place, routers that leave the Services' endpoints before
// they stop, and Go's memory limit under the container's.

// checkServiceAccounts: every workload runs as a ServiceAccount of its
// own, rendered with it, and neither the account nor the pod mounts an API
// token.
func checkServiceAccounts(t *testing.T, r *rendered, ws []workload) {
	t.Helper()
	accounts := map[string]*corev1.ServiceAccount{}
	for _, sa := range r.serviceAccounts {
		accounts[sa.Name] = sa
	}
	usedBy := map[string]string{}
	for _, w := range ws {
		where := w.kind + " " + w.name
		spec := w.pod.Spec
		name := spec.ServiceAccountName
		if name == "" || name == "default" {
			t.Errorf("%s: runs as the namespace's default ServiceAccount; give it its own (serviceAccountName)", where)
			continue
		}
		if other, ok := usedBy[name]; ok {
			t.Errorf("%s: ServiceAccount %s is %s's too; one per component", where, name, other)
		}
		usedBy[name] = where
		sa := accounts[name]
		switch {
		case sa == nil:
			t.Errorf("%s: ServiceAccount %s is not in the render", where, name)
		case sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken:
			t.Errorf("ServiceAccount %s: automountServiceAccountToken is not false", name)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the pod's automountServiceAccountToken is not false", where)
		}
	}
	for name := range accounts {
		if _, ok := usedBy[name]; !ok {
			t.Errorf("ServiceAccount %s: no workload runs as it", name)
		}
	}
}

// checkImages: every container's image names a tag other than latest, or
// a digest; shardlimit's is the kustomization's (the manifests name the
// bare placeholder, which renders untagged without it).
func checkImages(t *testing.T, ws []workload) {
	t.Helper()
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			where := w.kind + " " + w.name + " container " + c.Name
			name, digest, hasDigest := strings.Cut(c.Image, "@")
			tag := ""
			if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
				tag = name[i+1:]
			}
			switch {
			case hasDigest && digest != "":
			case tag == "":
				t.Errorf("%s: image %q has no tag: set it in the kustomization's images", where, c.Image)
			case tag == "latest":
				t.Errorf("%s: image %q: latest is not a version", where, c.Image)
			}
		}
	}
}

// The manifests under k8s/base name the shardlimit image by its
// placeholder alone, and base/kustomization.yaml sets its name and tag:
// one place to change for a release or an overlay.
func TestImageSetByKustomization(t *testing.T) {
	var k kustypes.Kustomization
	readStrict(t, filepath.Join("k8s", "base", "kustomization.yaml"), &k)
	var img *kustypes.Image
	for i := range k.Images {
		if k.Images[i].Name == "shardlimit" {
			img = &k.Images[i]
		}
	}
	if img == nil || img.NewName == "" || (img.NewTag == "" && img.Digest == "") || img.NewTag == "latest" {
		t.Fatalf("k8s/base/kustomization.yaml: images sets no name and tag (or digest) for the placeholder shardlimit: %+v", img)
	}
	want := img.NewName + ":" + img.NewTag
	if img.Digest != "" {
		want = img.NewName + "@" + img.Digest
	}
	imageLine := regexp.MustCompile(`^\s*image:\s*(\S+)`)
	for _, f := range k.Resources {
		b, err := os.ReadFile(filepath.Join("k8s", "base", f))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if m := imageLine.FindStringSubmatch(line); m != nil && m[1] != "shardlimit" {
				t.Errorf("k8s/base/%s:%d: image %s; name the placeholder shardlimit and let the kustomization set it", f, n+1, m[1])
			}
		}
	}
	for _, dir := range kustomizations(t) {
		for _, w := range render(t, dir).workloads() {
			for _, c := range w.pod.Spec.Containers {
				if isShardlimitImage(c.Image) && c.Image != want {
					t.Errorf("%s: %s %s container %s runs %s, want %s", dir, w.kind, w.name, c.Name, c.Image, want)
				}
			}
		}
	}
}

// routerStopTimeout is how long `shardlimit router` waits for its gRPC
// server to stop gracefully after SIGTERM (cmd/shardlimit/router.go).
const routerStopTimeout = 10 * time.Second

// checkRouterPreStop: routers sleep in a preStop hook (the sleep action:
// the image has no shell) long enough for the endpoints to drop them, and
// the grace period covers the sleep and the graceful stop. No shardlimit
// container runs a command in a hook: there is no shell to run it.
func checkRouterPreStop(t *testing.T, ws []workload) {
	t.Helper()
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isShardlimitImage(c.Image) || len(c.Args) == 0 {
				continue
			}
			where := w.kind + " " + w.name + " container " + c.Name
			var preStop *corev1.LifecycleHandler
			if c.Lifecycle != nil {
				preStop = c.Lifecycle.PreStop
				for kind, h := range map[string]*corev1.LifecycleHandler{"preStop": c.Lifecycle.PreStop, "postStart": c.Lifecycle.PostStart} {
					if h != nil && h.Exec != nil {
						t.Errorf("%s: %s runs %q: the distroless image has no shell or sleep; use the sleep action", where, kind, h.Exec.Command)
					}
				}
			}
			if c.Args[0] != "router" {
				continue
			}
			if preStop == nil || preStop.Sleep == nil {
				t.Errorf("%s: no preStop sleep: the router gets SIGTERM while Services and proxies still send to it", where)
				continue
			}
			sleep := time.Duration(preStop.Sleep.Seconds) * time.Second
			grace := w.pod.Spec.TerminationGracePeriodSeconds
			switch {
			case sleep < 5*time.Second:
				t.Errorf("%s: preStop sleeps %s, under the 5s endpoints take to drop a pod", where, sleep)
			case grace == nil || time.Duration(*grace)*time.Second < sleep+routerStopTimeout:
				t.Errorf("%s: terminationGracePeriodSeconds %v is under the preStop sleep %s plus the router's %s graceful stop", where, grace, sleep, routerStopTimeout)
			}
		}
	}
}

// goMemLimit parses a GOMEMLIMIT value as the Go runtime does: bytes, with
// an optional B, KiB, MiB, GiB or TiB suffix.
func goMemLimit(v string) (int64, error) {
	m := regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`).FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("%q is not bytes with an optional B, KiB, MiB, GiB or TiB suffix", v)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, err
	}
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return n << shift, nil
}

// checkGoMemLimit: the router and the rebalance job set GOMEMLIMIT, as a
// value, to at most 90% of their container's memory limit, so the garbage
// collector works harder before the kernel kills the pod. (The shards set
// Go's limit from --max-memory: checkShardMemory.)
func checkGoMemLimit(t *testing.T, ws []workload) {
	t.Helper()
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isShardlimitImage(c.Image) || len(c.Args) == 0 || c.Args[0] == "shard" {
				continue
			}
			where := w.kind + " " + w.name + " container " + c.Name
			var env *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == "GOMEMLIMIT" {
					env = &c.Env[i]
				}
			}
			limit, hasLimit := c.Resources.Limits[corev1.ResourceMemory]
			switch {
			case env == nil:
				t.Errorf("%s: no GOMEMLIMIT: set it to 90%% of the memory limit", where)
			case env.ValueFrom != nil:
				t.Errorf("%s: GOMEMLIMIT is set by valueFrom: a resourceFieldRef of limits.memory is the whole limit, and cannot take 90%% of it; set a value", where)
			case !hasLimit:
				t.Errorf("%s: no memory limit to keep GOMEMLIMIT under", where)
			default:
				v, err := goMemLimit(env.Value)
				switch {
				case err != nil:
					t.Errorf("%s: GOMEMLIMIT: %v", where, err)
				case v <= 0 || v*10 > limit.Value()*9:
					t.Errorf("%s: GOMEMLIMIT=%s is not in (0, 90%%] of the memory limit %s", where, env.Value, limit.String())
				}
			}
		}
	}
}

func TestGoMemLimitParse(t *testing.T) {
	for in, want := range map[string]int64{"460MiB": 460 << 20, "1GiB": 1 << 30, "1024": 1024, "7B": 7} {
		if got, err := goMemLimit(in); err != nil || got != want {
			t.Errorf("goMemLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"512Mi", "460MB", "", "1.5GiB"} {
		if _, err := goMemLimit(in); err == nil {
			t.Errorf("goMemLimit(%q): no error", in)
		}
	}
}
