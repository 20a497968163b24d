package deploy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/rules"
)

// This file parses the Envoy and Istio examples (envoy/envoy.yaml,
// envoy/envoy-tls.yaml, istio/envoyfilter.yaml) strictly into Envoy's v3
// API types, as Envoy would load them: an unknown field, a misspelt enum
// or an unregistered typed_config fails, and so does any rule of the
// types' protoc-gen-validate annotations, inside typed_configs too. It then
// checks that the examples fit together: the filter calls a cluster that
// speaks HTTP/2 to the router, every descriptor the route actions send is
// matched by a rule of envoy/rules.yaml (by the router's own matcher), and
// the TLS files are the ones deploy/k8s/gen-certs.sh writes.
//
// The filter and extension types the examples name are registered by the
// imports of this file; a new typed_config needs its package imported here.

// The typed_config types of the examples, registered by importing them.
var (
	_ = (*hcmv3.HttpConnectionManager)(nil)
	_ = (*routerfilterv3.Router)(nil)
	_ = (*ratelimitfilterv3.RateLimit)(nil)
	_ = (*tlsv3.UpstreamTlsContext)(nil)
	_ = (*upstreamhttpv3.HttpProtocolOptions)(nil)
)

const (
	envoyRulesFile  = "envoy/rules.yaml"
	envoyFilterFile = "istio/envoyfilter.yaml"
	// gatewayPatchFile mounts the gateway's client certificate.
	gatewayPatchFile = "istio/gateway-tls-patch.yaml"
	genCertsFile     = "k8s/gen-certs.sh"
	// routerCluster names the cluster of the routers in every example.
	routerCluster = "shardlimit_router"
)

// loadEnvoy parses a YAML document into m as Envoy does: field names and
// enum values must exist (DiscardUnknown false), every Any's type must be
// registered, and then every message, those inside Anys included, must
// pass its validation rules.
func loadEnvoy(doc []byte, m proto.Message) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, m); err != nil {
		return err
	}
	return validateDeep(m)
}

// validateDeep runs ValidateAll on m and on the content of every Any
// within it, at any depth: the generated validators stop at an Any.
func validateDeep(m proto.Message) error {
	var errs []error
	var walk func(where string, m proto.Message)
	walk = func(where string, m proto.Message) {
		v, ok := m.(interface{ ValidateAll() error })
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %T has no validator", where, m))
		} else if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		forEachAny(m.ProtoReflect(), func(a *anypb.Any) {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.TypeUrl, err))
				return
			}
			walk(a.TypeUrl, inner)
		})
	}
	walk(string(m.ProtoReflect().Descriptor().FullName()), m)
	return errors.Join(errs...)
}

// forEachAny calls f with every Any in m, not descending into them.
func forEachAny(m protoreflect.Message, f func(*anypb.Any)) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		f(a)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					forEachAny(mv.Message(), f)
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					forEachAny(v.List().Get(i).Message(), f)
				}
			}
		case fd.Message() != nil:
			forEachAny(v.Message(), f)
		}
		return true
	})
}

// unpack returns the content of a typed_config that must be a T.
func unpack[T proto.Message](a *anypb.Any) (T, error) {
	var zero T
	m, err := a.UnmarshalNew()
	if err != nil {
		return zero, err
	}
	t, ok := m.(T)
	if !ok {
		return zero, fmt.Errorf("%s is not a %T", a.GetTypeUrl(), zero)
	}
	return t, nil
}

func loadBootstrap(doc []byte) (*bootstrapv3.Bootstrap, error) {
	b := &bootstrapv3.Bootstrap{}
	return b, loadEnvoy(doc, b)
}

// example is one Envoy document of the examples, parsed, with what the
// checks need found in it.
type example struct {
	file      string
	bootstrap *bootstrapv3.Bootstrap
	httpRL    *ratelimitfilterv3.RateLimit
	routes    *routev3.RouteConfiguration // of the connection manager with the rate limit filter
	clusters  map[string]*clusterv3.Cluster
	accessLog []string // the stdout access logs' formats of that connection manager
}

func readExample(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadExample(t *testing.T, file string) *example {
	t.Helper()
	b, err := loadBootstrap(readExample(t, file))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ex := &example{file: file, bootstrap: b, clusters: map[string]*clusterv3.Cluster{}}
	for _, c := range b.GetStaticResources().GetClusters() {
		ex.clusters[c.Name] = c
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				m, err := unpack[*hcmv3.HttpConnectionManager](f.GetTypedConfig())
				if err != nil {
					t.Fatalf("%s: listener %s: %v", file, l.Name, err)
				}
				for _, vh := range m.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.Routes {
						if c := r.GetRoute().GetCluster(); r.GetRoute() != nil && ex.clusters[c] == nil {
							t.Errorf("%s: listener %s: route %v: no cluster %q", file, l.Name, r.Match, c)
						}
					}
				}
				rl := checkFilterChain(t, file+": listener "+l.Name, m.HttpFilters)
				if rl == nil {
					continue
				}
				if ex.httpRL != nil {
					t.Fatalf("%s: two rate limit filters", file)
				}
				ex.httpRL, ex.routes = rl, m.GetRouteConfig()
				for _, al := range m.GetAccessLog() {
					stdout, err := unpack[*streamv3.StdoutAccessLog](al.GetTypedConfig())
					if err != nil {
						t.Fatalf("%s: listener %s: access log %s: %v", file, l.Name, al.Name, err)
					}
					ex.accessLog = append(ex.accessLog, stdout.GetLogFormat().GetTextFormatSource().GetInlineString())
				}
				if ex.routes == nil {
					t.Fatalf("%s: listener %s: the example's routes are inline (route_config)", file, l.Name)
				}
			}
		}
	}
	if ex.httpRL == nil {
		t.Fatalf("%s: no envoy.filters.http.ratelimit filter", file)
	}
	return ex
}

// checkFilterChain checks that the router filter is last, and the rate
// limit filter, if any, right before it; it returns the rate limit
// filter's config.
func checkFilterChain(t *testing.T, where string, fs []*hcmv3.HttpFilter) *ratelimitfilterv3.RateLimit {
	t.Helper()
	var rl *ratelimitfilterv3.RateLimit
	for i, f := range fs {
		switch f.Name {
		case "envoy.filters.http.router":
			if i != len(fs)-1 {
				t.Errorf("%s: the router filter is not last", where)
			}
		case "envoy.filters.http.ratelimit":
			var err error
			if rl, err = unpack[*ratelimitfilterv3.RateLimit](f.GetTypedConfig()); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			if i+1 >= len(fs) || fs[i+1].Name != "envoy.filters.http.router" {
				t.Errorf("%s: the rate limit filter is not right before the router filter", where)
			}
		}
	}
	return rl
}

// checkRateLimitFilter checks the filter's settings that the examples
// promise, and that it calls cluster, which must speak HTTP/2.
func checkRateLimitFilter(t *testing.T, where string, rl *ratelimitfilterv3.RateLimit, cluster *clusterv3.Cluster) {
	t.Helper()
	svc := rl.GetRateLimitService()
	switch {
	case rl.FailureModeDeny:
		t.Errorf("%s: failure_mode_deny: the examples fail open", where)
	case rl.Timeout == nil || rl.Timeout.AsDuration() <= 0:
		t.Errorf("%s: no timeout", where)
	case rl.EnableXRatelimitHeaders != ratelimitfilterv3.RateLimit_DRAFT_VERSION_03:
		t.Errorf("%s: enable_x_ratelimit_headers %v", where, rl.EnableXRatelimitHeaders)
	case svc.GetTransportApiVersion().String() != "V3":
		t.Errorf("%s: rate_limit_service.transport_api_version %v, want V3", where, svc.GetTransportApiVersion())
	case svc.GetGrpcService().GetEnvoyGrpc().GetClusterName() != routerCluster:
		t.Errorf("%s: rate_limit_service calls %q, want %s", where, svc.GetGrpcService().GetEnvoyGrpc().GetClusterName(), routerCluster)
	}
	if cluster == nil {
		t.Fatalf("%s: no cluster %s", where, routerCluster)
	}
	opts, err := unpack[*upstreamhttpv3.HttpProtocolOptions](cluster.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"])
	if err != nil || opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("%s: cluster %s does not speak HTTP/2 (explicit_http_config.http2_protocol_options): %v", where, cluster.Name, err)
	}
}

// routerTLS returns the cluster's UpstreamTlsContext, nil when plain.
func routerTLS(t *testing.T, where string, c *clusterv3.Cluster) *tlsv3.UpstreamTlsContext {
	t.Helper()
	if c.GetTransportSocket() == nil {
		return nil
	}
	ctx, err := unpack[*tlsv3.UpstreamTlsContext](c.GetTransportSocket().GetTypedConfig())
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if !slices.Contains(ctx.GetCommonTlsContext().GetAlpnProtocols(), "h2") {
		t.Errorf("%s: no ALPN h2: gRPC servers refuse the connection", where)
	}
	return ctx
}

// tlsFiles returns the client certificate, key and CA files of ctx.
func tlsFiles(ctx *tlsv3.UpstreamTlsContext) (cert, key, ca string) {
	common := ctx.GetCommonTlsContext()
	if cs := common.GetTlsCertificates(); len(cs) == 1 {
		cert, key = cs[0].GetCertificateChain().GetFilename(), cs[0].GetPrivateKey().GetFilename()
	}
	return cert, key, common.GetValidationContext().GetTrustedCa().GetFilename()
}

// certNames returns the DNS names of the component certificate that
// gen-certs.sh makes for namespace ns.
func certNames(t *testing.T, ns string) []string {
	t.Helper()
	m := regexp.MustCompile(`\ncert router shardlimit [^"]*"([^"]*)"`).FindStringSubmatch(string(readExample(t, genCertsFile)))
	if m == nil {
		t.Fatalf("%s: no SANs of the router's certificate found", genCertsFile)
	}
	var names []string
	for _, san := range strings.Split(m[1], ",") {
		if n, ok := strings.CutPrefix(san, "DNS:"); ok {
			names = append(names, strings.ReplaceAll(n, "$ns", ns))
		}
	}
	return names
}

// checkVerifiesRouter checks that ctx verifies the router by names that
// gen-certs.sh puts in its certificate, and sends one of them as SNI.
func checkVerifiesRouter(t *testing.T, where string, ctx *tlsv3.UpstreamTlsContext, ns string) {
	t.Helper()
	sans := ctx.GetCommonTlsContext().GetValidationContext().GetMatchTypedSubjectAltNames()
	if len(sans) == 0 {
		t.Errorf("%s: the router's certificate is verified against no name", where)
	}
	names := certNames(t, ns)
	for _, san := range sans {
		if n := san.GetMatcher().GetExact(); san.SanType.String() != "DNS" || !slices.Contains(names, n) {
			t.Errorf("%s: verifies %v %q, not a DNS name of %s's certificate %v", where, san.SanType, n, genCertsFile, names)
		}
	}
	if ctx.Sni == "" || !slices.Contains(names, ctx.Sni) {
		t.Errorf("%s: sni %q is not a name of the router's certificate", where, ctx.Sni)
	}
}

// request is what the descriptor check asks of a rate limit action.
type request struct {
	path    string
	headers map[string]string
}

// exampleRequests are requests through the examples, and the rules of
// envoy/rules.yaml that decide their descriptors.
var exampleRequests = []struct {
	name  string
	req   request
	rules []string
}{
	{"checkout with a user", request{"/checkout", map[string]string{"x-user-id": "alice"}}, []string{"checkout-per-user", "global", "per-ip"}},
	{"checkout without a user", request{"/checkout/confirm", nil}, []string{"global", "per-ip"}},
	{"another path with a user", request{"/cart", map[string]string{"x-user-id": "alice"}}, []string{"global", "per-ip"}},
}

// descriptors returns the descriptors rls send for req, as Envoy builds
// them: one per rate limit whose actions all produce an entry.
func descriptors(rls []*routev3.RateLimit, req request) ([][]*ratelimitv3.RateLimitDescriptor_Entry, error) {
	var out [][]*ratelimitv3.RateLimitDescriptor_Entry
	header := func(name string) (string, bool) {
		if name == ":path" {
			return req.path, true
		}
		v, ok := req.headers[name]
		return v, ok
	}
	for _, rl := range rls {
		var entries []*ratelimitv3.RateLimitDescriptor_Entry
		complete := true
		for _, a := range rl.Actions {
			entry := func(key, defaultKey, value string) {
				if key == "" {
					key = defaultKey
				}
				entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: key, Value: value})
			}
			switch a := a.ActionSpecifier.(type) {
			case *routev3.RateLimit_Action_RemoteAddress_:
				entry("", "remote_address", "192.0.2.10")
			case *routev3.RateLimit_Action_GenericKey_:
				entry(a.GenericKey.DescriptorKey, "generic_key", a.GenericKey.DescriptorValue)
			case *routev3.RateLimit_Action_RequestHeaders_:
				v, ok := header(a.RequestHeaders.HeaderName)
				switch {
				case ok:
					entry(a.RequestHeaders.DescriptorKey, "", v)
				case !a.RequestHeaders.SkipIfAbsent:
					complete = false
				}
			case *routev3.RateLimit_Action_HeaderValueMatch_:
				matched := true
				for _, h := range a.HeaderValueMatch.Headers {
					v, ok := header(h.Name)
					switch m := h.HeaderMatchSpecifier.(type) {
					case *routev3.HeaderMatcher_StringMatch:
						sm := m.StringMatch
						switch {
						case sm.GetPrefix() != "":
							matched = matched && ok && strings.HasPrefix(v, sm.GetPrefix())
						case sm.GetExact() != "":
							matched = matched && ok && v == sm.GetExact()
						default:
							return nil, fmt.Errorf("header_value_match: this test knows only prefix and exact string matches")
						}
					case *routev3.HeaderMatcher_PresentMatch:
						matched = matched && ok == m.PresentMatch
					default:
						return nil, fmt.Errorf("header_value_match: this test does not know %T", m)
					}
					if h.InvertMatch {
						return nil, fmt.Errorf("header_value_match: this test does not know invert_match")
					}
				}
				if matched == (a.HeaderValueMatch.ExpectMatch == nil || a.HeaderValueMatch.ExpectMatch.Value) {
					entry(a.HeaderValueMatch.DescriptorKey, "header_match", a.HeaderValueMatch.DescriptorValue)
				} else {
					complete = false
				}
			default:
				return nil, fmt.Errorf("this test does not know what action %T sends: teach descriptors", a)
			}
		}
		if complete && len(entries) > 0 {
			out = append(out, entries)
		}
	}
	return out, nil
}

// checkDescriptors checks that, for each example request, every
// descriptor that rls(request) sends to domain is matched by a rule of
// envoy/rules.yaml, by the router's matcher, and that the matched rules
// are the expected ones. It returns the rules matched.
func checkDescriptors(t *testing.T, where, domain string, rls func(request) []*routev3.RateLimit) map[string]bool {
	t.Helper()
	rs, err := rules.ParseFile(envoyRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	set := rules.NewSet(rs)
	if !set.HasService(domain) {
		t.Fatalf("%s: domain %q is no service of %s", where, domain, envoyRulesFile)
	}
	used := map[string]bool{}
	for _, tc := range exampleRequests {
		ds, err := descriptors(rls(tc.req), tc.req)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var got []string
		for _, d := range ds {
			rule, _ := envoy.Match(set.Descriptors(domain), d, 0)
			if rule == nil {
				t.Errorf("%s: %s: descriptor %v matches no rule of %s", where, tc.name, d, envoyRulesFile)
				continue
			}
			got = append(got, rule.Name)
			used[rule.Name] = true
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.rules) {
			t.Errorf("%s: %s: descriptors %v are decided by rules %v, want %v", where, tc.name, ds, got, tc.rules)
		}
	}
	return used
}

// routeRateLimits returns the rate limits Envoy applies to a request to
// path through rc: the first virtual host's first route that matches by
// prefix, its own rate limits or else its virtual host's.
func routeRateLimits(t *testing.T, where string, rc *routev3.RouteConfiguration, reqPath string) []*routev3.RateLimit {
	t.Helper()
	vhs := rc.GetVirtualHosts()
	if len(vhs) != 1 || !slices.Equal(vhs[0].Domains, []string{"*"}) {
		t.Fatalf("%s: the example has one virtual host for every domain", where)
	}
	for _, r := range vhs[0].Routes {
		p, ok := r.GetMatch().GetPathSpecifier().(*routev3.RouteMatch_Prefix)
		if !ok {
			t.Fatalf("%s: this test knows only prefix route matches", where)
		}
		if strings.HasPrefix(reqPath, p.Prefix) {
			if rls := r.GetRoute().GetRateLimits(); len(rls) > 0 {
				return rls
			}
			return vhs[0].RateLimits
		}
	}
	return nil
}

func TestEnvoyExamples(t *testing.T) {
	plain := loadExample(t, "envoy/envoy.yaml")
	withTLS := loadExample(t, "envoy/envoy-tls.yaml")
	used := map[string]bool{}
	for _, ex := range []*example{plain, withTLS} {
		checkRateLimitFilter(t, ex.file, ex.httpRL, ex.clusters[routerCluster])
		for r := range checkDescriptors(t, ex.file, ex.httpRL.Domain, func(req request) []*routev3.RateLimit {
			return routeRateLimits(t, ex.file, ex.routes, req.path)
		}) {
			used[r] = true
		}
	}
	rs, _ := rules.ParseFile(envoyRulesFile)
	for _, r := range rs {
		if !used[r.Name] {
			t.Errorf("%s: rule %s decides no descriptor of the examples", envoyRulesFile, r.Name)
		}
	}

	if routerTLS(t, plain.file, plain.clusters[routerCluster]) != nil {
		t.Errorf("%s: the plain example has TLS to the router", plain.file)
	}
	ctx := routerTLS(t, withTLS.file, withTLS.clusters[routerCluster])
	if ctx == nil {
		t.Fatalf("%s: no transport_socket on cluster %s", withTLS.file, routerCluster)
	}
	// gen-certs.sh's certificate of Envoy and CA, as it names them.
	cert, key, ca := tlsFiles(ctx)
	dir := path.Dir(cert)
	if cert != dir+"/envoy.crt" || key != dir+"/envoy.key" || ca != dir+"/shardlimit-ca.crt" {
		t.Errorf("%s: TLS files %s, %s, %s; want envoy.crt, envoy.key and shardlimit-ca.crt of one directory (gen-certs.sh's names)", withTLS.file, cert, key, ca)
	}
	checkVerifiesRouter(t, withTLS.file, ctx, "shardlimit")

	// Nothing but the transport socket differs.
	stripped := proto.Clone(withTLS.bootstrap).(*bootstrapv3.Bootstrap)
	for _, c := range stripped.StaticResources.Clusters {
		if c.Name == routerCluster {
			c.TransportSocket = nil
		}
	}
	if !proto.Equal(stripped, plain.bootstrap) {
		t.Errorf("%s differs from %s by more than the %s cluster's transport_socket", withTLS.file, plain.file, routerCluster)
	}
}

// The plain example's access log shows which answers shardlimit made by a
// rule's failure policy, from the mark the router sets.
func TestEnvoyExampleLogsFailurePolicy(t *testing.T) {
	ex := loadExample(t, "envoy/envoy.yaml")
	want := "%DYNAMIC_METADATA(envoy.filters.http.ratelimit:" + envoy.MetadataNamespace + ":" + envoy.MetadataFailurePolicy + ")%"
	for _, f := range ex.accessLog {
		if strings.Contains(f, want) {
			return
		}
	}
	t.Errorf("%s: no access log prints %s: %q", ex.file, want, ex.accessLog)
}
