package etcd

import (
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/shardlimit/shardlimit/shard/rpc/redial"
)

// Dial returns an etcd client for endpoints whose own logging is kept to
// errors, so that component logs stay one line per event.
//
// tlsCfg, when not nil, secures the connection (and presents a client
// certificate if it holds one).
func Dial(endpoints []string, tlsCfg *tls.Config) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("etcd: at least one endpoint is required")
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	log, err := cfg.Build()
	if err != nil {
		log = zap.NewNop()
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsCfg,
		DialTimeout: 5 * time.Second,
		Logger:      log,
		// Fail fast when etcd is away; callers retry on their own schedule.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		// Reconnect within a second of etcd's return however long it was
		// away (gRPC's default backoff grows to 2 minutes): a restarted
		// etcd restores its leases for one TTL, within which each member
		// must find it again to keep its lease (membership.Register); and
		// within about a second of a cut network's heal (redial.Dialer). The
		// keepalive above closes a connection that a cut network left
		// silent (gRPC sets TCP_USER_TIMEOUT to the keepalive timeout).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(redial.ConnectParams), redial.Dialer()},
	})
}
