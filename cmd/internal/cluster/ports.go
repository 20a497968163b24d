package cluster

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePorts returns the first of n consecutive ports of 127.0.0.1 that
// are free now, below the kernel's range of ephemeral ports: a process
// stopped and started again on its port (etcd, a shard) finds it free
// again, where a port of that range may meanwhile be the local port of
// any outgoing connection on the machine ("address already in use": a
// fault-suite run under load lost etcd's port so). The search starts at a
// point drawn from the process id, so that concurrent callers seldom try
// the same ports.
func FreePorts(n int) (int, error) {
	lo, hi := portSearchRange(n)
	span := hi - lo
	off := os.Getpid() * 7919 % span
	for i := 0; i < span; i += n {
		if base := lo + (off+i)%span; free(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no run of %d free ports on 127.0.0.1 in %d..%d", n, lo, hi+n-1)
}

// firstFreePort is the lowest port FreePorts offers: above the ports of
// well-known services.
const firstFreePort = 10000

// portSearchRange returns the bases FreePorts may return, lo..hi-1: from
// firstFreePort to below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768 where it cannot be read).
func portSearchRange(n int) (lo, hi int) {
	ephemeral := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > firstFreePort+1000 {
				ephemeral = v
			}
		}
	}
	return firstFreePort, ephemeral - n
}

// free reports whether the n ports from base can be listened on now.
func free(base, n int) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	return true
}
