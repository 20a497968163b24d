package faults

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os/exec"

	"github.com/shardlimit/shardlimit/cmd/bench"
	"github.com/shardlimit/shardlimit/router/client"
)

// security says how the suite's processes and clients authenticate. It is
// the one place to change when the components require TLS and
// credentials: today everything speaks plain text, and --insecure is
// passed to the components that know the flag (those that will refuse to
// start in plain text without it).
type security struct {
	// insecureFlag: the binary's router, shard and rebalance accept
	// --insecure.
	insecureFlag bool
}

// detectSecurity asks the binary whether its components know --insecure.
func detectSecurity(bin string) (security, error) {
	out, err := exec.Command(bin, "router", "--help").CombinedOutput()
	if err != nil {
		return security{}, fmt.Errorf("shardlimit router --help: %v\n%s", err, out)
	}
	return security{insecureFlag: bytes.Contains(out, []byte("--insecure"))}, nil
}

// flags returns the security flags of a subcommand: "etcd", "shard",
// "router", "rebalance" or "ctl".
func (s security) flags(sub string) []string {
	if s.insecureFlag && (sub == "shard" || sub == "router" || sub == "rebalance") {
		return []string{"--insecure"}
	}
	return nil
}

// client sets the Go client's credentials towards the routers.
func (s security) client(*client.Options) {}

// bench sets the bench's credentials towards the routers.
func (s security) bench(*bench.Options) {}

// etcdTLS is the TLS of the suite's own etcd client; nil: plain text.
func (s security) etcdTLS() *tls.Config { return nil }
