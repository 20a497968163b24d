package envoy

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkResolve measures matching a request of two descriptors against
// the eight rules of modelRules plus replaces, before anything is counted.
func BenchmarkResolve(b *testing.B) {
	cands := parseRules(b, modelRules).Descriptors("m")
	req := &rlsv3.RateLimitRequest{Domain: "m", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("remote_address=10.0.0.1"), desc("key_2=value_2", "user=bkthomps"),
	}}
	hits := []int64{1, 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := resolve(cands, req, hits, 256); err != nil {
			b.Fatal(err)
		}
	}
}
