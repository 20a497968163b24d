package cluster

import (
	"net"
	"strconv"
	"testing"
)

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
