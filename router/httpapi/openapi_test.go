package httpapi_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/shardlimit/shardlimit/proto/openapi"
	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// The checked-in OpenAPI document describes what the router serves: the
// two routes, and every field of the messages they take and answer. A
// field added to a .proto file without `make proto` fails here.
func TestOpenAPIDocumentIsCurrent(t *testing.T) {
	var doc struct {
		Paths       map[string]map[string]json.RawMessage
		Definitions map[string]struct{ Properties map[string]json.RawMessage }
	}
	if err := json.Unmarshal(openapi.Document, &doc); err != nil {
		t.Fatalf("proto/openapi/shardlimit.swagger.json: %v", err)
	}
	routes := map[string][]string{}
	for path, ops := range doc.Paths {
		routes[path] = slices.Sorted(maps.Keys(ops))
	}
	want := map[string][]string{"/v1/check": {"post"}, "/json": {"post"}}
	if !maps.EqualFunc(routes, want, slices.Equal) {
		t.Fatalf("the document's routes are %v, the router serves %v: run make proto", routes, want)
	}
	for name, m := range map[string]proto.Message{
		"v1CheckRequest":                    &shardlimitv1.CheckRequest{},
		"shardlimitV1Check":                 &shardlimitv1.Check{},
		"v1CheckResponse":                   &shardlimitv1.CheckResponse{},
		"v1Decision":                        &shardlimitv1.Decision{},
		"v3RateLimitRequest":                &rlsv3.RateLimitRequest{},
		"v3RateLimitResponse":               &rlsv3.RateLimitResponse{},
		"RateLimitResponseDescriptorStatus": &rlsv3.RateLimitResponse_DescriptorStatus{},
	} {
		def, ok := doc.Definitions[name]
		if !ok {
			t.Errorf("the document has no definition %s: run make proto", name)
			continue
		}
		var fields []string
		fs := m.ProtoReflect().Descriptor().Fields()
		for i := range fs.Len() {
			fields = append(fields, fs.Get(i).JSONName())
		}
		slices.Sort(fields)
		if got := slices.Sorted(maps.Keys(def.Properties)); !slices.Equal(got, fields) {
			t.Errorf("definition %s has %v, message %s has %v: run make proto", name, got, m.ProtoReflect().Descriptor().FullName(), fields)
		}
	}
}
