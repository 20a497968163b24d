package main

import "testing"

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "1048576", want: 1 << 20},
		{in: "512MiB", want: 512 << 20},
		{in: "512mib", want: 512 << 20},
		{in: "1.5GiB", want: 3 << 29},
		{in: "4Mi", want: 4 << 20},
		{in: "64MB", want: 64_000_000},
		{in: "10 kB", want: 10_000},
		{in: "7B", want: 7},
		{in: "", bad: true},
		{in: "MiB", bad: true},
		{in: "-1MiB", bad: true},
		{in: "12 parsecs", bad: true},
		{in: "1e30", bad: true},
		{in: "99999999TiB", bad: true},
	} {
		got, err := parseSize(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d (error: %v)", c.in, got, err, c.want, c.bad)
		}
	}
	for n, want := range map[int64]string{1280 << 20: "1280MiB", 4 << 20: "4MiB", 1 << 30: "1GiB", 1000: "1000", 0: "0"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v", n, back, err)
		}
	}
	var small int
	if err := newSizeFlag(&small).Set("3GiB"); err != nil || small != 3<<30 {
		t.Errorf("int flag: %d, %v", small, err)
	}
}
