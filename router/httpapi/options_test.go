package httpapi

import (
	"strings"
	"testing"
)

// Bad options are refused naming the field and the bound; zero fields
// take their defaults.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string // "" for valid
	}{
		{Options{Listen: "127.0.0.1:0"}, ""},
		{Options{Listen: "127.0.0.1:0", MaxBody: MinBody}, ""},
		{Options{Listen: "127.0.0.1:0", MaxBody: MaxBody}, ""},
		{Options{}, "http listen: an address is required"},
		{Options{Listen: ":1", MaxBody: 10}, "http max body: 10 bytes not in 1024..67108864"},
		{Options{Listen: ":1", MaxBody: MaxBody + 1}, "http max body: 67108865 bytes not in 1024..67108864"},
		{Options{Listen: ":1", MaxBody: -1}, "http max body: -1 bytes not in"},
	} {
		err := c.o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.o, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The API's per-address bound is a share of its own connection bound, not
// of gRPC's: one address never holds every HTTP connection by default.
func TestPerPeerBoundIsAShareOfTheAPIsOwn(t *testing.T) {
	for _, c := range []struct {
		grpcMax, perPeer, httpMax, want int
	}{
		{grpcMax: 2000, httpMax: 50, want: 2},      // 5% of 50, not min(100, 50)
		{grpcMax: 20000, httpMax: 2000, want: 100}, // 5% of 2000, not 1000
		{grpcMax: 2000, perPeer: 30, httpMax: 2000, want: 30},
		{grpcMax: 2000, perPeer: 300, httpMax: 100, want: 100},
	} {
		o := Options{MaxConnections: c.httpMax}
		o.Limits.MaxConnections, o.Limits.MaxConnectionsPerPeer = c.grpcMax, c.perPeer
		if got := o.limits().MaxConnectionsPerPeer; got != c.want {
			t.Errorf("%+v: %d per address, want %d", c, got, c.want)
		}
	}
}
