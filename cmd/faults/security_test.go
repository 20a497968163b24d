package faults

import (
	"github.com/shardlimit/shardlimit/cmd/bench"
	process "github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/router/client"
)

// security is the one local PKI of cmd/internal/cluster, which the
// robustness suite shares: every component its certificate, the suite's
// own clients the operator, etcd in plain text on 127.0.0.1.
type security struct{ process.Security }

// client sets the Go client's credentials towards the routers.
func (s security) client(o *client.Options) { o.TLS = s.OperatorTLS() }

// bench sets the bench's credentials towards the routers.
func (s security) bench(o *bench.Options) { o.TLS = s.OperatorTLS() }
