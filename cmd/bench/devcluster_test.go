package bench

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis, 150 user and 25
	// system ticks.
	line := "4242 (shard (x) 1) S 1 4242 4242 0 -1 4194560 5000 0 0 0 150 25 0 0 20 0 12 0 100 1000000 2000 18446744073709551615"
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1750 * time.Millisecond; got != want {
		t.Errorf("parseStatCPU = %v; want %v", got, want)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 eleven 12"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) gave no error", bad)
		}
	}
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Errorf("procCPU(self): %v", err)
	}
}

func TestFreePortsAreARun(t *testing.T) {
	base, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	// Free when found; another process may take one since, so only the
	// shape is checked: a listen on the first one normally works.
	// Below the ephemeral ports, which outgoing connections take.
	if lo, hi := portSearchRange(5); base < lo || base >= hi {
		t.Fatalf("base port %d, want %d..%d", base, lo, hi-1)
	}
	if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base)); err == nil {
		l.Close()
	}
}
