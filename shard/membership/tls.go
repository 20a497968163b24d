package membership

import (
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DialCreds returns the gRPC transport credentials for calls to other
// components: TLS with cfg (a client certificate for mTLS), or plain text
// when cfg is nil.
func DialCreds(cfg *tls.Config) grpc.DialOption {
	if cfg == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

// ServerCreds returns the gRPC server options for cfg: TLS (requiring and
// verifying client certificates when cfg says so), or none for plain text.
func ServerCreds(cfg *tls.Config) []grpc.ServerOption {
	if cfg == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg))}
}
