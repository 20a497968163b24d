package etcd

import (
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
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
		// must find it again to keep its lease (membership.Register).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
}
