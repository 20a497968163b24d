package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shardlimit/shardlimit/shard/creds"
)

// devCluster is a `shardlimit dev` process: embedded etcd, a router and
// shards as its child processes, on free ports of 127.0.0.1.
type devCluster struct {
	cmd    *exec.Cmd
	router string      // gRPC address
	tls    *tls.Config // the operator's, from the client config dev wrote
	// serverTLS serves the baseline as dev's router serves: its
	// certificate, verifying callers by dev's CA.
	serverTLS *tls.Config
	pids      map[string]int // "router", "shard-1", ...
	shards    int
	done      chan struct{}
	// etcd is dev's etcd, and config the client config file it wrote,
	// beside its credentials: what a router of the bench's own needs.
	etcd, config string
	// more are routers the bench started itself (addRouter), beside dev's.
	more []*extraRouter

	mu     sync.Mutex
	tail   []string // last lines of output, for errors
	cfgErr error
}

// loadTLS reads the client config file dev wrote: the bench calls the
// router as the operator, who may check every service.
func (c *devCluster) loadTLS(path string) error {
	cfg, err := creds.LoadClientConfig(path)
	if err != nil {
		return fmt.Errorf("dev's client config: %w", err)
	}
	if c.tls, err = cfg.TLS(); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	c.serverTLS, err = creds.ServerTLS(creds.Files{Cert: filepath.Join(dir, "router.pem"), Key: filepath.Join(dir, "router-key.pem"), CA: cfg.TLSCA}, tls.RequireAndVerifyClientCert)
	return err
}

var (
	pidLine    = regexp.MustCompile(`^\s+(\S+)\s+pid (\d+)\s`)
	exportLine = regexp.MustCompile(`^export ` + creds.EnvConfig + `=(\S+)`)
)

// startDev starts `bin dev --shards n` and waits for its ready line and
// the pids of its router and shards.
func startDev(ctx context.Context, bin string, shards int) (*devCluster, error) {
	// dev takes etcd, the router and then the metrics ports of the router,
	// the shards and the rebalance instance in a row.
	base, err := FreePorts(shards + 4)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(base+i) }
	c := &devCluster{router: addr(1), etcd: addr(0), pids: map[string]int{}, shards: shards, done: make(chan struct{})}
	c.cmd = exec.Command(bin, "dev", "--shards", strconv.Itoa(shards), "--etcd-listen", addr(0),
		"--router-listen", addr(1), "--metrics-listen", addr(2))
	// Its own process group, so that a Ctrl-C meant for the bench reaches
	// dev only through stop; and it dies with the bench.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stderr = c.cmd.Stdout
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s dev: %w", bin, err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		isReady := false
		config := ""
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			if len(c.tail) == 20 {
				c.tail = c.tail[1:]
			}
			c.tail = append(c.tail, line)
			if strings.HasPrefix(line, "shardlimit dev ready in ") {
				isReady = true
			} else if m := pidLine.FindStringSubmatch(line); m != nil && isReady {
				pid, _ := strconv.Atoi(m[2])
				c.pids[m[1]] = pid
			} else if m := exportLine.FindStringSubmatch(line); m != nil && isReady {
				config = m[1]
				c.config = config
				if len(c.pids) == shards+2 { // shards, router, rebalance
					c.cfgErr = c.loadTLS(config)
					close(ready)
				}
			}
			c.mu.Unlock()
		}
		_ = c.cmd.Wait()
	}()
	select {
	case <-ready:
		if c.cfgErr != nil {
			c.stop()
			return nil, c.cfgErr
		}
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("dev --shards %d exited before it was ready:\n%s", shards, c.lastLines())
	case <-time.After(60 * time.Second):
		c.stop()
		return nil, fmt.Errorf("dev --shards %d not ready after 60s:\n%s", shards, c.lastLines())
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

func (c *devCluster) lastLines() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

// componentPids returns the routers' pids (dev's and the bench's own) and
// the shards'.
func (c *devCluster) componentPids() (routers, shards []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i <= c.shards; i++ {
		shards = append(shards, c.pids["shard-"+strconv.Itoa(i)])
	}
	routers = []int{c.pids["router"]}
	for _, r := range c.more {
		routers = append(routers, r.cmd.Process.Pid)
	}
	return routers, shards
}

// routers returns the gRPC addresses of every router: dev's, then the
// bench's own.
func (c *devCluster) routers() []string {
	out := []string{c.router}
	for _, r := range c.more {
		out = append(out, r.addr)
	}
	return out
}

// extraRouter is a router process the bench started beside dev's.
type extraRouter struct {
	cmd  *exec.Cmd
	addr string
}

// addRouter starts one more router on dev's etcd, secure with dev's router
// certificate, grants file and etcd client certificate, and waits until it is ready (its /readyz).
func (c *devCluster) addRouter(ctx context.Context, bin string) error {
	base, err := FreePorts(2)
	if err != nil {
		return err
	}
	addr, metrics := "127.0.0.1:"+strconv.Itoa(base), "127.0.0.1:"+strconv.Itoa(base+1)
	dir := filepath.Dir(c.config)
	cmd := exec.Command(bin, "router", "--listen", addr, "--metrics-listen", metrics, "--etcd", c.etcd, "--prefix", "/shardlimit/",
		"--tls-cert", filepath.Join(dir, "router.pem"), "--tls-key", filepath.Join(dir, "router-key.pem"),
		"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-server-name", creds.LocalServerName,
		"--grants-file", filepath.Join(dir, "grants.yaml"))
	e := creds.LocalEtcdClient(filepath.Join(dir, "etcd"), creds.EtcdRouterUser) // dev's etcd requires a client certificate
	cmd.Args = append(cmd.Args, "--etcd-cert", e.Cert, "--etcd-key", e.Key, "--etcd-ca", e.CA)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a second router: %w", err)
	}
	c.mu.Lock()
	c.more = append(c.more, &extraRouter{cmd: cmd, addr: addr})
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the second router on %s was not ready within 30s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop interrupts dev, which stops its children, and waits for it; it
// kills dev after 30s. The bench's own routers are stopped first.
func (c *devCluster) stop() {
	for _, r := range c.more {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		_ = r.cmd.Wait()
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

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

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the user plus system CPU time of pid from
// /proc/<pid>/stat (its threads included, its children not).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime+stime of a /proc/<pid>/stat line.
func parseStatCPU(s string) (time.Duration, error) {
	// The command name may hold spaces and parentheses; the fields after
	// its last ')' do not.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields", len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
