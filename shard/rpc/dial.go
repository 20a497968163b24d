package rpc

import (
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardlimit/shardlimit/shard/rpc/redial"
	"github.com/shardlimit/shardlimit/shard/rpc/vtcodec"
)

// DialOptions returns the options of a connection to another component:
// TLS with cfg (a client certificate for mTLS), or plain text when cfg is
// nil; package redial's ConnectParams and Dialer; and package vtcodec's
// codec.
func DialOptions(cfg *tls.Config) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(redial.ConnectParams),
		redial.Dialer(),
		vtcodec.DialOption(),
	}
}
