package envoy_test

import (
	"os"
	"testing"

	"github.com/shardlimit/shardlimit/cmd/cluster"
)

// etcdEndpoint is the package's one embedded etcd; each test runs under its
// own key prefix.
var etcdEndpoint string

func TestMain(m *testing.M) { os.Exit(cluster.RunWithEtcd(m, &etcdEndpoint)) }
