package rebalance

import "testing"

func TestCountAgreesWithItsNumber(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 partitions move"}, {1, "1 partition moves"}, {2, "2 partitions move"}} {
		if got := count(tc.n, "partition moves", "partitions move"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
