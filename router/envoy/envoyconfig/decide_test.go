package envoyconfig

import (
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/rules"
)

func entries(s string) []*ratelimitv3.RateLimitDescriptor_Entry {
	var out []*ratelimitv3.RateLimitDescriptor_Entry
	for e := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(e, "=")
		out = append(out, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return out
}

// converted parses and converts one fixture, and returns its tree and
// its rules as router/envoy sees them.
func converted(t *testing.T, file string) ([]*Descriptor, []*rules.Rule, *Result) {
	t.Helper()
	c, err := ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert([]*Config{c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := res.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	return c.Descriptors, rules.NewSet(rs).Descriptors(c.Domain), res
}

// limitOf describes the limit a rule applies: "none", "unlimited",
// "deny", or "<limit>/<period>", with " shadow".
func limitOf(r *rules.Rule) string {
	s := ""
	switch {
	case r == nil:
		return "none"
	case r.Unlimited:
		s = "unlimited"
	case r.DenyAll:
		s = "deny"
	default:
		s = strings.Join([]string{itoa(r.Limit), r.Period.String()}, "/")
	}
	if r.Shadow {
		s += " shadow"
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// envoyLimitOf describes what envoy ratelimit applies, as limitOf.
func envoyLimitOf(d *Descriptor) string {
	if d == nil {
		return "none"
	}
	rl := d.RateLimit
	s := ""
	switch {
	case rl.Unlimited:
		s = "unlimited"
	case rl.RequestsPerUnit == 0:
		s = "deny"
	default:
		p, _ := rules.ParseDuration(Units[rl.Unit])
		s = itoa(int64(rl.RequestsPerUnit)) + "/" + p.String()
	}
	if d.ShadowMode || d.QuotaMode {
		s += " shadow"
	}
	return s
}

// The README's examples decide as the README says, through envoy
// ratelimit's walk (Lookup) and through the converted rules (Match), and
// the wildcard counters are one per value.
func TestReadmeExamplesDecide(t *testing.T) {
	for _, tc := range []struct {
		file, desc, want, counter string
	}{
		{"example1", "database=users", "500/1s", "*"},
		{"example1", "database=default", "500/1s", "*"},
		{"example1", "database=other", "none", ""},
		{"example2", "message_type=marketing;to_number=2061111111", "5/1d", "2061111111"},
		{"example2", "message_type=marketing;to_number=2062222222", "5/1d", "2062222222"},
		{"example2", "to_number=2061111111", "100/1d", "2061111111"},
		{"example2", "message_type=marketing", "none", ""},
		{"example2", "message_type=transactional;to_number=2061111111", "none", ""},
		{"example3", "remote_address=50.0.0.1", "10/1s", "50.0.0.1"},
		{"example3", "remote_address=50.0.0.5", "deny", "*"},
		{"example4-flat", "key=value;subkey=subvalue", "none", ""},
		{"example4-flat", "key=value", "300/1s", "*"},
		{"example4-nested", "key=value;subkey=subvalue", "300/1s", "subvalue"},
		{"example4-nested", "key=value", "none", ""},
		{"example5", "ldap=x", "unlimited", "x"},
		{"example5", "azure=x", "100/1m", "x"},
		{"example6", "service=auth-service;user=user-a", "10/1s shadow", "auth-service"},
		{"example6", "service=auth-service;user=user-b", "20/1s", "auth-service"},
		{"example6", "service=auth-service;user=user-c", "none", ""},
		{"example7", "key_1=value_1;user=bkthomps", "5/1s", "*"},
		{"example7", "key_2=value_2;user=bkthomps", "10/1s", "*"},
		{"example8", "key1=unspecified_value", "10/1m", "unspecified_value"},
		{"example8", "key1=value1", "20/1m", "*"},
		{"example9", "key1=value1", "20/1m", "value1"},
		{"example9", "key1=value2", "20/1m", "value2"},
		{"example9", "key1=other", "none", ""},
	} {
		top, cands, _ := converted(t, filepath.Join("testdata/readme", tc.file+".yaml"))
		es := entries(tc.desc)
		if got := envoyLimitOf(Lookup(top, es)); got != tc.want {
			t.Errorf("%s (%s): envoy ratelimit's walk applies %s, the README says %s", tc.file, tc.desc, got, tc.want)
		}
		r, counter := envoy.Match(cands, es, 0)
		if got := limitOf(r); got != tc.want || counter != tc.counter {
			t.Errorf("%s (%s): the rules apply %s counter %q, want %s counter %q", tc.file, tc.desc, got, counter, tc.want, tc.counter)
		}
	}
}

// Every fixture without a lossy note decides like envoy ratelimit for
// random descriptors built from its keys and values (and some other
// values): the converted rules and the walk agree.
func TestConvertedAgreesWithWalk(t *testing.T) {
	files, _ := filepath.Glob("testdata/readme/*.yaml")
	examples, _ := filepath.Glob("testdata/envoy-examples/*.yaml")
	files = append(append(files, examples...), "testdata/greedy.yaml")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range files {
		top, cands, res := converted(t, f)
		lossy := false
		noted := map[int]bool{} // lines of the descriptors noted as decided otherwise
		for _, n := range res.Notes {
			// Metrics and quota mode's metadata do not change the limit.
			lossy = lossy || (n.Lossy && !strings.HasPrefix(n.Message, "detailed_metric") && !strings.HasPrefix(n.Message, "quota_mode"))
			noted[n.Line] = n.Lossy
		}
		if lossy && !strings.HasSuffix(f, "greedy.yaml") {
			t.Errorf("%s: lossy notes %v", f, res.Notes)
		}
		// Keys and values by depth.
		type kv struct{ k, v string }
		var byDepth [][]kv
		var rec func([]*Descriptor, int)
		rec = func(ds []*Descriptor, depth int) {
			for _, d := range ds {
				if len(byDepth) <= depth {
					byDepth = append(byDepth, nil)
				}
				v := strings.TrimSuffix(d.Value, "*")
				byDepth[depth] = append(byDepth[depth], kv{d.Key, v}, kv{d.Key, v + "z"}, kv{d.Key, "other"})
				rec(d.Descriptors, depth+1)
			}
		}
		rec(top, 0)
		for range 2000 {
			n := 1 + rng.IntN(len(byDepth))
			es := make([]*ratelimitv3.RateLimitDescriptor_Entry, n)
			for i := range n {
				// Mostly keys of the level, sometimes of another.
				lvl := byDepth[i]
				if rng.IntN(5) == 0 {
					lvl = byDepth[rng.IntN(len(byDepth))]
				}
				e := lvl[rng.IntN(len(lvl))]
				es[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.k, Value: e.v}
			}
			want := Lookup(top, es)
			if want != nil && noted[want.Line] {
				continue // left out or decided otherwise, and noted
			}
			r, _ := envoy.Match(cands, es, 0)
			if w, g := envoyLimitOf(want), limitOf(r); w != g && !(w == "none" && g == "unlimited") {
				t.Errorf("%s (%s): envoy ratelimit applies %s, the rules %s", f, probeString(es), w, g)
			}
		}
	}
}
