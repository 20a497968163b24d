package httpapi_test

import (
	"os"
	"testing"

	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// etcdEndpoint is the package's one embedded etcd; each test runs under its
// own key prefix.
var etcdEndpoint string

func TestMain(m *testing.M) { os.Exit(embedded.RunTests(m, &etcdEndpoint)) }
