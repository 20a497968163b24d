package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// This file parses istio/envoyfilter.yaml: the EnvoyFilter strictly into
// the fields it uses, and each patch's value strictly into the Envoy v3
// type it patches (with envoy_test.go's loadEnvoy rules), then checks it
// as envoy_test.go checks envoy/envoy.yaml, against the Services of
// deploy/k8s, and with the gateway mount of istio/gateway-tls-patch.yaml.

// envoyFilter is the part of Istio's networking.istio.io/v1alpha3
// EnvoyFilter that istio/ uses, parsed strictly; each patch's value is
// then parsed into the Envoy type it patches (patchTypes).
type envoyFilter struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		WorkloadSelector *struct {
			Labels map[string]string `json:"labels"`
		} `json:"workloadSelector,omitempty"`
		ConfigPatches []struct {
			ApplyTo string `json:"applyTo"`
			Match   struct {
				Context  string `json:"context,omitempty"`
				Listener *struct {
					FilterChain struct {
						Filter struct {
							Name      string `json:"name"`
							SubFilter *struct {
								Name string `json:"name"`
							} `json:"subFilter,omitempty"`
						} `json:"filter"`
					} `json:"filterChain"`
				} `json:"listener,omitempty"`
				RouteConfiguration *struct {
					Vhost *struct {
						Name string `json:"name,omitempty"`
					} `json:"vhost,omitempty"`
				} `json:"routeConfiguration,omitempty"`
			} `json:"match"`
			Patch struct {
				Operation string          `json:"operation"`
				Value     json.RawMessage `json:"value"`
			} `json:"patch"`
		} `json:"configPatches"`
	} `json:"spec"`
}

// patchTypes gives, for each applyTo the example uses, the Envoy type of
// a patch value and the operations allowed; another applyTo fails until
// it is added here and to loadEnvoyFilter.
var patchTypes = map[string]struct {
	new        func() proto.Message
	operations []string
}{
	"HTTP_FILTER":  {func() proto.Message { return &hcmv3.HttpFilter{} }, []string{"INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST"}},
	"CLUSTER":      {func() proto.Message { return &clusterv3.Cluster{} }, []string{"ADD"}},
	"VIRTUAL_HOST": {func() proto.Message { return &routev3.VirtualHost{} }, []string{"MERGE"}},
}

// istioExample is istio/envoyfilter.yaml, parsed.
type istioExample struct {
	filter    *envoyFilter
	httpRL    *ratelimitfilterv3.RateLimit // the rate limit filter's config
	cluster   *clusterv3.Cluster           // the cluster added
	rateLimit []*routev3.RateLimit         // the virtual hosts' rate limits
}

func loadEnvoyFilter(doc []byte) (*istioExample, error) {
	ef := &envoyFilter{}
	if err := yaml.UnmarshalStrict(doc, ef); err != nil {
		return nil, err
	}
	if ef.APIVersion != "networking.istio.io/v1alpha3" || ef.Kind != "EnvoyFilter" {
		return nil, fmt.Errorf("%s %s, want networking.istio.io/v1alpha3 EnvoyFilter", ef.APIVersion, ef.Kind)
	}
	ex := &istioExample{filter: ef}
	var errs []error
	for i, p := range ef.Spec.ConfigPatches {
		where := fmt.Sprintf("configPatches[%d] (%s)", i, p.ApplyTo)
		pt, ok := patchTypes[p.ApplyTo]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: applyTo %q is not one this test knows", where, p.ApplyTo))
			continue
		case !slices.Contains(pt.operations, p.Patch.Operation):
			errs = append(errs, fmt.Errorf("%s: operation %q, want one of %v", where, p.Patch.Operation, pt.operations))
		case !slices.Contains([]string{"SIDECAR_INBOUND", "SIDECAR_OUTBOUND", "GATEWAY", "ANY"}, p.Match.Context):
			errs = append(errs, fmt.Errorf("%s: match.context %q is not SIDECAR_INBOUND, SIDECAR_OUTBOUND, GATEWAY or ANY", where, p.Match.Context))
		}
		m := pt.new()
		if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(p.Patch.Value, m); err != nil {
			errs = append(errs, fmt.Errorf("%s: value: %w", where, err))
			continue
		}
		var err error
		switch v := m.(type) {
		case *hcmv3.HttpFilter:
			err = validateDeep(v)
			if v.GetName() == "envoy.filters.http.ratelimit" && err == nil {
				ex.httpRL, err = unpack[*ratelimitfilterv3.RateLimit](v.GetTypedConfig())
			}
		case *clusterv3.Cluster:
			err, ex.cluster = validateDeep(v), v
		case *routev3.VirtualHost:
			// A MERGE holds only the fields it sets: validate those.
			rest := proto.Clone(v).(*routev3.VirtualHost)
			rest.RateLimits = nil
			if !proto.Equal(rest, &routev3.VirtualHost{}) {
				err = fmt.Errorf("sets more than rate_limits, which this test does not check")
			}
			for _, rl := range v.RateLimits {
				err = errors.Join(err, validateDeep(rl))
			}
			ex.rateLimit = append(ex.rateLimit, v.RateLimits...)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: value: %w", where, err))
		}
	}
	return ex, errors.Join(errs...)
}

func TestIstioEnvoyFilter(t *testing.T) {
	ex, err := loadEnvoyFilter(readExample(t, envoyFilterFile))
	if err != nil {
		t.Fatalf("%s: %v", envoyFilterFile, err)
	}
	if ex.httpRL == nil || ex.cluster == nil || len(ex.rateLimit) == 0 {
		t.Fatalf("%s: want a rate limit HTTP filter, a cluster and rate limits", envoyFilterFile)
	}
	for _, p := range ex.filter.Spec.ConfigPatches {
		if p.ApplyTo != "HTTP_FILTER" {
			continue
		}
		if l := p.Match.Listener; p.Patch.Operation != "INSERT_BEFORE" || l == nil ||
			l.FilterChain.Filter.Name != "envoy.filters.network.http_connection_manager" ||
			l.FilterChain.Filter.SubFilter == nil || l.FilterChain.Filter.SubFilter.Name != "envoy.filters.http.router" {
			t.Errorf("%s: the rate limit filter is not inserted before the router filter of the HTTP connection manager", envoyFilterFile)
		}
		if c := p.Match.Context; c != "GATEWAY" && c != "SIDECAR_INBOUND" {
			t.Errorf("%s: the rate limit filter applies to %s, want GATEWAY or SIDECAR_INBOUND", envoyFilterFile, c)
		}
	}
	checkRateLimitFilter(t, envoyFilterFile, ex.httpRL, ex.cluster)
	used := checkDescriptors(t, envoyFilterFile, ex.httpRL.Domain, func(request) []*routev3.RateLimit { return ex.rateLimit })
	if len(used) == 0 {
		t.Errorf("%s: no descriptor decided by a rule", envoyFilterFile)
	}

	// The cluster dials a router Service of deploy/k8s on its gRPC port,
	// by its cluster DNS name.
	r := render(t, "k8s/base")
	if len(r.namespaces) != 1 {
		t.Fatalf("k8s/base renders %d namespaces, want 1", len(r.namespaces))
	}
	ns := r.namespaces[0].Name
	eps := ex.cluster.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].LbEndpoints) != 1 {
		t.Fatalf("%s: cluster %s: want one endpoint, a Service's name", envoyFilterFile, ex.cluster.Name)
	}
	sa := eps[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress()
	svcName, ok := strings.CutSuffix(sa.GetAddress(), "."+ns+".svc.cluster.local")
	i := slices.IndexFunc(r.services, func(s *corev1.Service) bool { return s.Name == svcName })
	switch {
	case !ok || i < 0:
		t.Errorf("%s: cluster %s dials %s, not SERVICE.%s.svc.cluster.local for a Service of k8s/base", envoyFilterFile, ex.cluster.Name, sa.GetAddress(), ns)
	case !slices.ContainsFunc(r.services[i].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "grpc" && uint32(p.Port) == sa.GetPortValue() }):
		t.Errorf("%s: cluster %s dials port %d, not the grpc port of Service %s", envoyFilterFile, ex.cluster.Name, sa.GetPortValue(), svcName)
	case r.services[i].Spec.Selector["app.kubernetes.io/component"] != "router":
		t.Errorf("%s: Service %s does not select the routers", envoyFilterFile, svcName)
	}

	// mTLS with a certificate mounted into the gateway by
	// gateway-tls-patch.yaml, in the layout of the shardlimit-tls secret.
	ctx := routerTLS(t, envoyFilterFile, ex.cluster)
	if ctx == nil {
		t.Fatalf("%s: cluster %s has no TLS: the routers of deploy/k8s require mTLS", envoyFilterFile, ex.cluster.Name)
	}
	checkVerifiesRouter(t, envoyFilterFile, ctx, ns)
	cert, key, ca := tlsFiles(ctx)
	dir := path.Dir(cert)
	if cert != dir+"/tls.crt" || key != dir+"/tls.key" || ca != dir+"/ca.crt" {
		t.Errorf("%s: TLS files %s, %s, %s; want tls.crt, tls.key and ca.crt of one directory (a TLS secret's layout)", envoyFilterFile, cert, key, ca)
	}
	checkGatewayMount(t, dir)
}

// checkGatewayMount checks that gateway-tls-patch.yaml, a strategic merge
// patch of the gateway's Deployment, mounts a secret at dir in the proxy.
func checkGatewayMount(t *testing.T, dir string) {
	t.Helper()
	const file = gatewayPatchFile
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(readExample(t, file), d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		t.Fatalf("%s: %s %s, want apps/v1 Deployment", file, d.APIVersion, d.Kind)
	}
	spec := d.Spec.Template.Spec
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath != dir {
				continue
			}
			if c.Name != "istio-proxy" {
				t.Errorf("%s: %s is mounted in container %s, not istio-proxy", file, dir, c.Name)
			}
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && v.Secret != nil }) {
				t.Errorf("%s: mount %s is no secret volume of the patch", file, m.Name)
			}
			return
		}
	}
	t.Errorf("%s mounts nothing at %s, where %s reads the gateway's certificate", file, dir, envoyFilterFile)
}
