package cluster

import "testing"

func TestPageSumMatchesLabelsExactly(t *testing.T) {
	page, err := ParseMetrics([]byte(`# HELP x a metric
# TYPE x counter
x{method="LeaseKeepAlive",code="OK"} 3
x{method="LeaseKeepAliveStream",code="OK"} 5
x{method="Range",code="OK"} 7 1700000000000
x_total 11
y{v="a \"quoted\", value\\",k="z"} 2.5
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		found  bool
	}{
		{"x", nil, 15, true},
		{"x", []string{"method", "LeaseKeepAlive"}, 3, true}, // not LeaseKeepAliveStream
		{"x", []string{"method", "Range", "code", "OK"}, 7, true},
		{"x", []string{"method", "Lease"}, 0, false},
		{"x_total", nil, 11, true},
		{"y", []string{"v", `a "quoted", value\`, "k", "z"}, 2.5, true},
		{"z", nil, 0, false},
	} {
		if v, ok := page.Sum(tc.name, tc.labels...); v != tc.want || ok != tc.found {
			t.Errorf("Sum(%s, %q) = %v, %v; want %v, %v", tc.name, tc.labels, v, ok, tc.want, tc.found)
		}
	}
	if _, err := ParseMetrics([]byte("x{a=\"b} 1\n")); err == nil {
		t.Error("an unterminated label value parsed")
	}
}
