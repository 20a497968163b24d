package etcd

import (
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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
	})
}
