package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/deploy"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// devCluster is the cluster of `shardlimit dev` (cmd/internal/cluster):
// an etcd inside the bench, routers and shards as processes, on free
// ports of 127.0.0.1, secure, with dev's sample rules.
type devCluster struct {
	*cluster.Cluster
	tls *tls.Config // the operator's: the bench may check every service; nil in plain text
	// serverTLS serves the baseline as the routers serve: their
	// certificate, verifying callers by the cluster's CA; nil in plain
	// text.
	serverTLS *tls.Config
}

// startDev starts a cluster of shards shards and routers routers, as dev
// runs it (in plain text with o.PlainText, the routers' --deadline
// o.RouterDeadline and --calls-per-shard o.RouterCallsPerShard when set),
// and returns once every router routes to
// every shard.
func startDev(ctx context.Context, o *TableOptions, shards, routers int) (*devCluster, error) {
	sample, err := rules.Parse("sample-rules.yaml", deploy.SampleRules)
	if err != nil {
		return nil, err
	}
	flags := func(p *cluster.Proc) []string {
		var out []string
		if p.Sub == "router" && o.RouterDeadline > 0 {
			out = append(out, "--deadline", o.RouterDeadline.String())
		}
		if p.Sub == "router" && o.RouterCallsPerShard > 0 {
			out = append(out, "--calls-per-shard", strconv.Itoa(o.RouterCallsPerShard))
		}
		return out
	}
	c, err := cluster.Start(ctx, cluster.Options{Binary: o.Binary, Shards: shards, Routers: routers, Rules: sample,
		StopGrace: 10 * time.Second, ReadyTimeout: 60 * time.Second, PlainText: o.PlainText, Flags: flags})
	if err != nil {
		return nil, fmt.Errorf("a cluster of %d shards: %w", shards, err)
	}
	d := &devCluster{Cluster: c}
	if o.PlainText {
		return d, nil // the bench and its baseline speak plain text too
	}
	d.tls = c.Security.OperatorTLS()
	if d.serverTLS, err = creds.ServerTLS(c.Security.PKI.Router, tls.RequireAndVerifyClientCert); err != nil {
		c.Stop()
		return nil, err
	}
	return d, nil
}

// componentPids returns the routers' pids and the shards'.
func (c *devCluster) componentPids() (routers, shards []int) {
	for _, p := range c.Routers {
		routers = append(routers, p.Pid())
	}
	for _, p := range c.Shards {
		shards = append(shards, p.Pid())
	}
	return routers, shards
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
