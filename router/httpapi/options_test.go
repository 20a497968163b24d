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
