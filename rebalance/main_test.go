package rebalance_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/shardlimit/shardlimit/cmd/cluster"
)

// etcdEndpoint is the package's one embedded etcd; each test runs under its
// own key prefix.
var etcdEndpoint string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "shardlimit-rebalance-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	e, err := cluster.StartEtcd(dir, "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Close()
	etcdEndpoint = e.Endpoint()
	return m.Run()
}
