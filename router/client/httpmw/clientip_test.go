package httpmw

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParsePrefixes([]string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		remote  string
		header  string // the configured ForwardedHeader
		xff     []string
		fwd     []string
		trusted []netip.Prefix
		want    string // "" = not ok
	}{
		{name: "no forwarding header", remote: "203.0.113.7:1234", want: "203.0.113.7"},
		{name: "spoofed X-Forwarded-For from an untrusted peer", remote: "203.0.113.7:1234", xff: []string{"198.51.100.9"}, want: "203.0.113.7"},
		{name: "spoofed Forwarded from an untrusted peer", remote: "203.0.113.7:1234", header: "Forwarded", fwd: []string{"for=198.51.100.9"}, want: "203.0.113.7"},
		{name: "no trusted proxies configured", remote: "10.0.0.1:1234", xff: []string{"198.51.100.9"}, trusted: []netip.Prefix{}, want: "10.0.0.1"},
		{name: "trusted proxy", remote: "10.0.0.1:1234", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
		{name: "single trusted address", remote: "192.0.2.1:1234", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
		{name: "forged hops left of the real client", remote: "10.0.0.1:1234", xff: []string{"1.2.3.4, 5.6.7.8, 198.51.100.9"}, want: "198.51.100.9"},
		{name: "chain of trusted proxies", remote: "10.0.0.1:1234", xff: []string{"198.51.100.9, 10.1.1.1, 10.2.2.2"}, want: "198.51.100.9"},
		{name: "forged trusted-looking hop left of the client", remote: "10.0.0.1:1234", xff: []string{"10.9.9.9, 198.51.100.9, 10.1.1.1"}, want: "198.51.100.9"},
		{name: "several header lines", remote: "10.0.0.1:1234", xff: []string{"1.2.3.4", "198.51.100.9, 10.1.1.1"}, want: "198.51.100.9"},
		{name: "every hop trusted", remote: "10.0.0.1:1234", xff: []string{"10.9.9.9, 10.1.1.1"}, want: "10.9.9.9"},
		{name: "empty header", remote: "10.0.0.1:1234", xff: []string{""}, want: "10.0.0.1"},
		{name: "garbage hop stops the walk", remote: "10.0.0.1:1234", xff: []string{"198.51.100.9, unknown, 10.1.1.1"}, want: "10.1.1.1"},
		{name: "garbage right-most hop", remote: "10.0.0.1:1234", xff: []string{"198.51.100.9, bogus"}, want: "10.0.0.1"},
		{name: "hops with ports", remote: "10.0.0.1:1234", xff: []string{"198.51.100.9:8080, 10.1.1.1:443"}, want: "198.51.100.9"},
		{name: "IPv6 hops", remote: "10.0.0.1:1234", xff: []string{"2001:db8::1, [2001:db8:ffff::2]:443"}, want: "2001:db8::1"},
		{name: "IPv6 trusted peer", remote: "[2001:db8:ffff::1]:443", xff: []string{"[2001:db8::2]"}, want: "2001:db8::2"},
		{name: "IPv4-mapped trusted peer", remote: "[::ffff:10.0.0.1]:1234", xff: []string{"::ffff:198.51.100.9"}, want: "198.51.100.9"},
		{name: "IPv6 peer with a zone", remote: "[fe80::1%eth0]:1234", want: "fe80::1"},
		{name: "Forwarded", remote: "10.0.0.1:1234", header: "Forwarded",
			fwd: []string{`for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`}, want: "2001:db8:cafe::17"},
		{name: "Forwarded, trusted right-most hop", remote: "10.0.0.1:1234", header: "forwarded",
			fwd: []string{`For="198.51.100.9:80"`, `for=10.1.1.1;proto=https`}, want: "198.51.100.9"},
		{name: "Forwarded quoted comma in another parameter", remote: "10.0.0.1:1234", header: "Forwarded",
			fwd: []string{`for=198.51.100.9;ext="a,b;c=d"`}, want: "198.51.100.9"},
		{name: "Forwarded obfuscated node", remote: "10.0.0.1:1234", header: "Forwarded", fwd: []string{"for=198.51.100.9, for=_hidden"}, want: "10.0.0.1"},
		{name: "Forwarded element without for", remote: "10.0.0.1:1234", header: "Forwarded", fwd: []string{"for=198.51.100.9, proto=https"}, want: "10.0.0.1"},
		{name: "X-Forwarded-For ignored when Forwarded is configured", remote: "10.0.0.1:1234", header: "Forwarded", xff: []string{"198.51.100.9"}, want: "10.0.0.1"},
		{name: "Forwarded ignored when X-Forwarded-For is configured", remote: "10.0.0.1:1234", fwd: []string{"for=198.51.100.9"}, want: "10.0.0.1"},
		{name: "custom header", remote: "10.0.0.1:1234", header: "X-Real-IP", want: "198.51.100.7"},
		{name: "unix socket peer", remote: "@", want: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range c.fwd {
				r.Header.Add("Forwarded", v)
			}
			header := c.header
			if header == "" {
				header = "X-Forwarded-For"
			}
			if header == "X-Real-IP" {
				r.Header.Set("X-Real-IP", "198.51.100.7")
			}
			tr := trusted
			if c.trusted != nil {
				tr = c.trusted
			}
			got, ok := ClientIP(r, tr, header)
			if c.want == "" {
				if ok {
					t.Fatalf("got %v, want not ok", got)
				}
				return
			}
			if !ok || got.String() != c.want {
				t.Fatalf("got %v %v, want %s", got, ok, c.want)
			}
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	ps, err := ParsePrefixes([]string{"10.1.2.3/8", " 192.0.2.1 ", "", "2001:db8::/32", "::ffff:192.0.2.9"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.1/32", "2001:db8::/32", "192.0.2.9/32"}
	if len(ps) != len(want) {
		t.Fatalf("%v", ps)
	}
	for i := range want {
		if ps[i].String() != want[i] {
			t.Errorf("%d: %v, want %s", i, ps[i], want[i])
		}
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/33"}); err == nil {
		t.Error("10.0.0.0/33: no error")
	}
}
