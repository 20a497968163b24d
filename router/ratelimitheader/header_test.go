package ratelimitheader

import "testing"

func TestFields(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Policy("checkout", 10, 60), `"checkout";q=10;w=60`},
		{Policy("checkout", 10, 0), `"checkout";q=10`},
		{Limit("checkout", 0, 6), `"checkout";r=0;t=6`},
		{Limit("x", -3, 1<<62), `"x";r=0;t=999999999999999`},
		{String(`a"b\c` + "\n\xff"), `"a\"b\\c??"`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}
