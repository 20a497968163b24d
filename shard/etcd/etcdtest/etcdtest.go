package etcdtest

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// Start starts an embedded etcd of the test's own on 127.0.0.1, adjusted
// by adjust, and returns a client of it; both close with the test.
func Start(tb testing.TB, adjust ...func(*embed.Config)) *clientv3.Client {
	tb.Helper()
	e, err := embedded.Start(tb.TempDir(), "127.0.0.1:0", adjust...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	cli, err := etcd.Dial([]string{e.Endpoint()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}
