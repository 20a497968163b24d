package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// This file renders every kustomization under k8s/ as `kubectl apply -k`
// would, parses each object strictly into its Kubernetes API type (an
// unknown or misspelt field fails), and checks that the objects fit
// together: selectors select, named ports exist, mounts have volumes,
// referenced ConfigMaps are rendered, and the partition count agrees.

// externalSecrets are the secrets the manifests mount but do not create:
// the operator creates them (k8s/README.md).
var externalSecrets = []string{
	"shardlimit-router-tls", "shardlimit-shard-tls", "shardlimit-rebalance-tls",
	"shardlimit-etcd-router-tls", "shardlimit-etcd-shard-tls", "shardlimit-etcd-rebalance-tls", "shardlimit-etcd-root-tls",
	"shardlimit-etcd-server-tls", "shardlimit-etcd-peer-tls",
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor that
// deploy/ uses; parsed strictly.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is the output of one kustomization, by type.
type rendered struct {
	dir             string
	namespaces      []*corev1.Namespace
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	deployments     []*appsv1.Deployment
	statefulSets    []*appsv1.StatefulSet
	jobs            []*batchv1.Job
	networkPolicies []*networkingv1.NetworkPolicy
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	serviceAccounts []*corev1.ServiceAccount
	serviceMonitors []*serviceMonitor
	prometheusRules []*prometheusRule
	objects         []metav1.Object
}

// workload is a Deployment's or StatefulSet's pod template, named.
type workload struct {
	kind, name string
	selector   *metav1.LabelSelector
	pod        *corev1.PodTemplateSpec
}

func (r *rendered) workloads() []workload {
	var ws []workload
	for _, d := range r.deployments {
		ws = append(ws, workload{"Deployment", d.Name, d.Spec.Selector, &d.Spec.Template})
	}
	for _, s := range r.statefulSets {
		ws = append(ws, workload{"StatefulSet", s.Name, s.Spec.Selector, &s.Spec.Template})
	}
	for _, j := range r.jobs { // the Job's pods carry its template's labels
		ws = append(ws, workload{"Job", j.Name, &metav1.LabelSelector{MatchLabels: j.Spec.Template.Labels}, &j.Spec.Template})
	}
	return ws
}

// decodeStrict parses one object of the render into its API type.
func (r *rendered) decodeStrict(b []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return err
	}
	into := func(v any) error { return yaml.UnmarshalStrict(b, v) }
	var err error
	switch gvk := tm.APIVersion + " " + tm.Kind; gvk {
	case "v1 Namespace":
		o := &corev1.Namespace{}
		err, r.namespaces, r.objects = into(o), append(r.namespaces, o), append(r.objects, o)
	case "v1 Service":
		o := &corev1.Service{}
		err, r.services, r.objects = into(o), append(r.services, o), append(r.objects, o)
	case "v1 ServiceAccount":
		o := &corev1.ServiceAccount{}
		err, r.serviceAccounts, r.objects = into(o), append(r.serviceAccounts, o), append(r.objects, o)
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		err, r.configMaps, r.objects = into(o), append(r.configMaps, o), append(r.objects, o)
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		err, r.deployments, r.objects = into(o), append(r.deployments, o), append(r.objects, o)
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		err, r.statefulSets, r.objects = into(o), append(r.statefulSets, o), append(r.objects, o)
	case "batch/v1 Job":
		o := &batchv1.Job{}
		err, r.jobs, r.objects = into(o), append(r.jobs, o), append(r.objects, o)
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		err, r.networkPolicies, r.objects = into(o), append(r.networkPolicies, o), append(r.objects, o)
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		err, r.pdbs, r.objects = into(o), append(r.pdbs, o), append(r.objects, o)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		err, r.hpas, r.objects = into(o), append(r.hpas, o), append(r.objects, o)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		o := &serviceMonitor{}
		err, r.serviceMonitors, r.objects = into(o), append(r.serviceMonitors, o), append(r.objects, &o.Metadata)
	case "monitoring.coreos.com/v1 PrometheusRule":
		o := &prometheusRule{}
		err, r.prometheusRules, r.objects = into(o), append(r.prometheusRules, o), append(r.objects, &o.Metadata)
	default:
		return fmt.Errorf("no API type for %s in this test: add one", gvk)
	}
	return err
}

// kustomizations returns the directories under k8s/ holding a
// kustomization.yaml.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir("k8s", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return err
	})
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no kustomization under k8s/: %v", err)
	}
	return dirs
}

func render(t *testing.T, dir string) *rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{dir: dir}
	for _, res := range m.Resources() {
		b, err := res.AsYAML()
		if err != nil {
			t.Fatalf("%s: %s %s: %v", dir, res.GetKind(), res.GetName(), err)
		}
		if err := r.decodeStrict(b); err != nil {
			t.Errorf("%s: %s %s: %v", dir, res.GetKind(), res.GetName(), err)
		}
	}
	return r
}

// Every kustomization renders, and every object in it parses strictly and
// fits with the others.
func TestKustomizations(t *testing.T) {
	for _, dir := range kustomizations(t) {
		t.Run(filepath.ToSlash(dir), func(t *testing.T) {
			r := render(t, dir)
			checkRendered(t, r)
		})
	}
}

func checkRendered(t *testing.T, r *rendered) {
	configMaps := map[string]*corev1.ConfigMap{}
	for _, c := range r.configMaps {
		configMaps[c.Name] = c
	}
	for _, o := range r.objects {
		if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != "shardlimit" {
			t.Errorf("%s: namespace %q, want shardlimit", o.GetName(), o.GetNamespace())
		}
	}

	ws := r.workloads()
	for _, w := range ws {
		checkPod(t, w, configMaps)
	}
	for _, s := range r.services {
		var matched []workload
		for _, w := range ws {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(w.pod.Labels)) {
				matched = append(matched, w)
			}
		}
		if len(matched) == 0 {
			t.Errorf("Service %s selects no workload", s.Name)
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.StrVal == "" {
				t.Errorf("Service %s port %s: use a named targetPort", s.Name, p.Name)
				continue
			}
			for _, w := range matched {
				if !hasPort(w.pod, p.TargetPort.StrVal) {
					t.Errorf("Service %s port %s: %s %s has no container port %q", s.Name, p.Name, w.kind, w.name, p.TargetPort.StrVal)
				}
			}
		}
	}
	for _, st := range r.statefulSets {
		i := slices.IndexFunc(r.services, func(s *corev1.Service) bool { return s.Name == st.Spec.ServiceName })
		if i < 0 || r.services[i].Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("StatefulSet %s: serviceName %q is not a headless Service of the render", st.Name, st.Spec.ServiceName)
		}
	}
	for _, p := range r.pdbs {
		if !slices.ContainsFunc(ws, func(w workload) bool { return selects(p.Spec.Selector, w) }) {
			t.Errorf("PodDisruptionBudget %s selects no workload", p.Name)
		}
	}
	for _, h := range r.hpas {
		ref := h.Spec.ScaleTargetRef
		i := slices.IndexFunc(r.deployments, func(d *appsv1.Deployment) bool { return d.Name == ref.Name })
		if ref.Kind != "Deployment" || i < 0 {
			t.Errorf("HorizontalPodAutoscaler %s: scales %s %s, not a Deployment of the render", h.Name, ref.Kind, ref.Name)
		} else if r.deployments[i].Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas, which its HorizontalPodAutoscaler owns", ref.Name)
		}
	}
	for _, sm := range r.serviceMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Errorf("ServiceMonitor %s: %v", sm.Metadata.Name, err)
			continue
		}
		var matched []*corev1.Service
		for _, s := range r.services {
			if sel.Matches(labels.Set(s.Labels)) {
				matched = append(matched, s)
			}
		}
		if len(matched) == 0 {
			t.Errorf("ServiceMonitor %s selects no Service", sm.Metadata.Name)
		}
		for _, e := range sm.Spec.Endpoints {
			for _, s := range matched {
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
					t.Errorf("ServiceMonitor %s: Service %s has no port %q", sm.Metadata.Name, s.Name, e.Port)
				}
			}
		}
	}
	checkPartitions(t, ws)
	checkShardMemory(t, ws)
	checkDrainFitsGrace(t, ws)
	checkServiceAccounts(t, r, ws)
	checkImages(t, ws)
	checkRouterPreStop(t, ws)
	checkGoMemLimit(t, ws)
	checkEtcdEndpoints(t, r, configMaps)
	checkEtcdClients(t, r, ws)
	checkNetworkPolicies(t, r, ws)
}

// selects reports whether sel, not empty, selects w's pods.
func selects(sel *metav1.LabelSelector, w workload) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(w.pod.Labels))
}

func hasPort(pod *corev1.PodTemplateSpec, name string) bool {
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name }) {
			return true
		}
	}
	return false
}

// checkPod checks one pod template: the selector selects it, probes use
// declared ports, mounts have volumes, volumes and env refer to ConfigMaps
// of the render or to the documented secrets, and every $(VAR) of the args
// is defined in env.
func checkPod(t *testing.T, w workload, configMaps map[string]*corev1.ConfigMap) {
	where := w.kind + " " + w.name
	sel, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.pod.Labels)) {
		t.Errorf("%s: selector %v does not select its pod template's labels %v", where, w.selector, w.pod.Labels)
	}
	spec := w.pod.Spec
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
		switch {
		case v.Secret != nil && !slices.Contains(externalSecrets, v.Secret.SecretName):
			t.Errorf("%s: volume %s: secret %s is not one of the documented %v", where, v.Name, v.Secret.SecretName, externalSecrets)
		case v.ConfigMap != nil && configMaps[v.ConfigMap.Name] == nil:
			t.Errorf("%s: volume %s: ConfigMap %s is not in the render", where, v.Name, v.ConfigMap.Name)
		}
	}
	if w.kind == "StatefulSet" {
		// volumeClaimTemplates are checked by the API types alone.
		volumes["data"] = true
	}
	for _, c := range spec.Containers {
		where := where + " container " + c.Name
		if c.Image == "" {
			t.Errorf("%s: no image", where)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no CPU request or memory limit", where)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: mount %s has no volume", where, m.Name)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			if ports[p.Name] {
				t.Errorf("%s: port name %s used twice", where, p.Name)
			}
			ports[p.Name] = true
		}
		for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil {
				continue
			}
			if p.HTTPGet != nil && p.HTTPGet.Port.StrVal != "" && !ports[p.HTTPGet.Port.StrVal] {
				t.Errorf("%s: %s probe on undeclared port %q", where, kind, p.HTTPGet.Port.StrVal)
			}
		}
		if w.kind != "Job" && (c.ReadinessProbe == nil || c.LivenessProbe == nil) {
			t.Errorf("%s: needs a readiness and a liveness probe", where)
		}
		env := map[string]bool{}
		for _, e := range c.Env {
			env[e.Name] = true
			if ref := e.ValueFrom; ref != nil && ref.ConfigMapKeyRef != nil {
				cm := configMaps[ref.ConfigMapKeyRef.Name]
				if cm == nil {
					t.Errorf("%s: env %s: ConfigMap %s is not in the render", where, e.Name, ref.ConfigMapKeyRef.Name)
				} else if _, ok := cm.Data[ref.ConfigMapKeyRef.Key]; !ok {
					t.Errorf("%s: env %s: ConfigMap %s has no key %s", where, e.Name, cm.Name, ref.ConfigMapKeyRef.Key)
				}
			}
		}
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			for rest := a; ; {
				i := strings.Index(rest, "$(")
				if i < 0 {
					break
				}
				j := strings.IndexByte(rest[i:], ')')
				if j < 0 {
					break
				}
				if name := rest[i+2 : i+j]; !env[name] {
					t.Errorf("%s: arg %q uses $(%s), which env does not define", where, a, name)
				}
				rest = rest[i+j:]
			}
		}
	}
}

// shardlimitContainers returns the containers that run the shardlimit
// binary, with their subcommand.
func shardlimitContainers(ws []workload) (out []struct {
	where, sub string
	args       []string
}) {
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isShardlimitImage(c.Image) || len(c.Args) == 0 {
				continue
			}
			out = append(out, struct {
				where, sub string
				args       []string
			}{w.kind + " " + w.name + " container " + c.Name, c.Args[0], c.Args[1:]})
		}
	}
	return out
}

func isShardlimitImage(image string) bool {
	name := image[strings.LastIndexByte(image, '/')+1:]
	name, _, _ = strings.Cut(name, ":")
	name, _, _ = strings.Cut(name, "@")
	return name == "shardlimit"
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// Routers, shards and the rebalance job agree on the partition count:
// whichever starts first on an empty etcd fixes it in the shard map
// record, and the others refuse to start with another.
func checkPartitions(t *testing.T, ws []workload) {
	values := map[string][]string{}
	for _, c := range shardlimitContainers(ws) {
		if c.sub == "etcd" { // the auth Job: no partitions
			continue
		}
		if v, ok := flagValue(c.args, "partitions"); ok {
			values[v] = append(values[v], c.where)
		} else {
			t.Errorf("%s: no --partitions; set it on every component, so that whichever starts first fixes the count the others are given", c.where)
		}
	}
	if len(values) > 1 {
		t.Errorf("components disagree on --partitions: %v", values)
	}
}

// Every shard bounds its process's memory with --max-memory at most 7/8 of
// its container's memory limit (the rest is for what the kernel counts
// beside the process), and leaves GOMEMLIMIT unset: the shard sets Go's
// soft limit from --max-memory, and a GOMEMLIMIT of the container's limit
// would let the heap outgrow the bound.
func checkShardMemory(t *testing.T, ws []workload) {
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isShardlimitImage(c.Image) || len(c.Args) == 0 || c.Args[0] != "shard" {
				continue
			}
			v, ok := flagValue(c.Args[1:], "max-memory")
			if !ok {
				t.Errorf("%s %s: no --max-memory; set it to fit the memory limit", w.kind, w.name)
				continue
			}
			bound, err := resource.ParseQuantity(strings.TrimSuffix(v, "B")) // 1280MiB → 1280Mi
			limit, hasLimit := c.Resources.Limits[corev1.ResourceMemory]
			switch {
			case err != nil:
				t.Errorf("%s %s: --max-memory=%s: %v", w.kind, w.name, v, err)
			case !hasLimit:
				t.Errorf("%s %s: no memory limit to fit --max-memory in", w.kind, w.name)
			case bound.Value()*8 > limit.Value()*7:
				t.Errorf("%s %s: --max-memory=%s is over 7/8 of the memory limit %s", w.kind, w.name, v, limit.String())
			}
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					t.Errorf("%s %s: GOMEMLIMIT is set; the shard sets Go's memory limit from --max-memory", w.kind, w.name)
				}
			}
		}
	}
}

// A shard's drain fits its pod's grace period: --drain-timeout is set and
// leaves at least 10s of terminationGracePeriodSeconds for deregistering
// and the calls in flight.
func checkDrainFitsGrace(t *testing.T, ws []workload) {
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isShardlimitImage(c.Image) || len(c.Args) == 0 || c.Args[0] != "shard" {
				continue
			}
			v, ok := flagValue(c.Args[1:], "drain-timeout")
			if !ok {
				t.Errorf("%s %s: no --drain-timeout; set it to fit terminationGracePeriodSeconds", w.kind, w.name)
				continue
			}
			drain, err := time.ParseDuration(v)
			grace := w.pod.Spec.TerminationGracePeriodSeconds
			switch {
			case err != nil:
				t.Errorf("%s %s: --drain-timeout=%s: %v", w.kind, w.name, v, err)
			case grace == nil || time.Duration(*grace)*time.Second < drain+10*time.Second:
				t.Errorf("%s %s: terminationGracePeriodSeconds %v leaves under 10s after --drain-timeout=%s", w.kind, w.name, grace, v)
			}
		}
	}
}

// The rendered etcd StatefulSet has 3 members, its --initial-cluster names
// them, and the components' etcd endpoints name them too.
func checkEtcdEndpoints(t *testing.T, r *rendered, configMaps map[string]*corev1.ConfigMap) {
	t.Helper()
	i := slices.IndexFunc(r.statefulSets, func(s *appsv1.StatefulSet) bool { return s.Name == "shardlimit-etcd" })
	if i < 0 {
		return
	}
	etcd := r.statefulSets[i]
	replicas := int32(1)
	if etcd.Spec.Replicas != nil {
		replicas = *etcd.Spec.Replicas
	}
	if replicas != 3 {
		t.Errorf("etcd has %d members, want 3", replicas)
	}
	var peers, clients []string
	for n := range replicas {
		peers = append(peers, fmt.Sprintf("%[1]s-%[2]d=https://%[1]s-%[2]d.%[3]s.$(POD_NAMESPACE).svc:2380", etcd.Name, n, etcd.Spec.ServiceName))
		clients = append(clients, fmt.Sprintf("https://%s-%d.%s:2379", etcd.Name, n, etcd.Spec.ServiceName))
	}
	if v, _ := flagValue(etcd.Spec.Template.Spec.Containers[0].Args, "initial-cluster"); v != strings.Join(peers, ",") {
		t.Errorf("etcd --initial-cluster=%s, want %s", v, strings.Join(peers, ","))
	}
	for name, cm := range configMaps { // generated: shardlimit-etcd-<hash>
		if v, ok := cm.Data["endpoints"]; ok && strings.HasPrefix(name, "shardlimit-etcd") && v != strings.Join(clients, ",") {
			t.Errorf("ConfigMap %s: endpoints %s, want the etcd members %s", name, v, strings.Join(clients, ","))
		}
	}
}

// Every YAML file under k8s/ is part of some kustomization, so none is
// forgotten by `kubectl apply -k`; kustomization files parse strictly.
func TestNoOrphanManifests(t *testing.T) {
	used := map[string]bool{}
	for _, dir := range kustomizations(t) {
		path := filepath.Join(dir, "kustomization.yaml")
		used[path] = true
		var k kustypes.Kustomization
		readStrict(t, path, &k)
		for _, r := range k.Resources {
			used[filepath.Join(dir, r)] = true
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.FileSources {
				_, src, ok := strings.Cut(f, "=")
				if !ok {
					src = f
				}
				used[filepath.Join(dir, src)] = true
			}
		}
	}
	err := filepath.WalkDir("k8s", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) && !used[p] {
			t.Errorf("%s is in no kustomization", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The sample rules in the ConfigMap are deploy/rules/sample.yaml.
func TestSampleRulesCopy(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("rules", "sample.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("k8s", "base", "sample-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("k8s/base/sample-rules.yaml differs from rules/sample.yaml: cp deploy/rules/sample.yaml deploy/k8s/base/sample-rules.yaml")
	}
}
