package main

import (
	"github.com/spf13/pflag"

	"github.com/shardlimit/shardlimit/shard/rpc"
)

// registerLimits adds the flags of a gRPC server's limits (rpc.Limits),
// the same for the router, the shard and the rebalance job.
func registerLimits(f *pflag.FlagSet, l *rpc.Limits) {
	f.IntVar(&l.MaxConnections, "max-connections", l.MaxConnections, "open gRPC connections, counted from accept (before TLS); past it new ones are closed at once (counted in shardlimit_<component>_connections_refused_total{reason=\"global\"})")
	f.IntVar(&l.MaxConnectionsPerPeer, "max-connections-per-peer", l.MaxConnectionsPerPeer, "open connections from one client IP; past it its new ones are closed at once (reason=\"per_peer\"); 0: 5% of --max-connections, at least 1 (100 of 2000); set it to --max-connections behind a proxy that hides callers' addresses")
	f.DurationVar(&l.HandshakeTimeout, "handshake-timeout", l.HandshakeTimeout, "close a connection whose TLS handshake and HTTP/2 preface are not done this long after accept (reason=\"handshake_timeout\"); also the HTTP API's TLS handshake and request header timeout")
	f.DurationVar(&l.AuthTimeout, "auth-timeout", l.AuthTimeout, "close a connection that has finished its handshake but not authenticated this long after (reason=\"auth_timeout\"): a client certificate that a grant names authenticates it at once, else its first call with a known token or certificate; an anonymous Health Check does not; 100ms..10m")
	f.Uint32Var(&l.MaxConcurrentStreams, "max-concurrent-streams", l.MaxConcurrentStreams, "calls in flight on one connection; clients wait past it")
	f.Var(newSizeFlag(&l.MaxRecvMsgSize), "max-recv-msg-size", "largest request message (like 4MiB); larger ones fail with RESOURCE_EXHAUSTED")
	f.Var(newSizeFlag(&l.MaxSendMsgSize), "max-send-msg-size", "largest answer message (like 16MiB); larger ones fail with RESOURCE_EXHAUSTED")
	f.DurationVar(&l.MaxConnectionIdle, "max-connection-idle", l.MaxConnectionIdle, "close a connection with no call in flight for this long (clients reconnect on their next call)")
	f.DurationVar(&l.MaxConnectionAge, "max-connection-age", l.MaxConnectionAge, "close a connection this long after it opened (±10%), so clients spread over new servers")
	f.DurationVar(&l.MaxConnectionAgeGrace, "max-connection-age-grace", l.MaxConnectionAgeGrace, "let calls in flight finish this long after --max-connection-age")
	f.DurationVar(&l.KeepaliveTime, "keepalive-time", l.KeepaliveTime, "ping a client after this long without traffic")
	f.DurationVar(&l.KeepaliveTimeout, "keepalive-timeout", l.KeepaliveTimeout, "close a connection whose ping is not answered within this long")
	f.DurationVar(&l.KeepaliveMinTime, "keepalive-min-time", l.KeepaliveMinTime, "shortest interval at which a client may ping; one that pings more often is disconnected")
	f.BoolVar(&l.KeepalivePermitWithoutStream, "keepalive-permit-without-stream", l.KeepalivePermitWithoutStream, "let clients ping with no call in flight")
}
