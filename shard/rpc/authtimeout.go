package rpc

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"

	"github.com/shardlimit/shardlimit/shard/rpc/connauth"
)

// ConnAuthenticator is what a server's authentication (auth.Authorizer)
// tells its ConnBound about connections, for Limits.AuthTimeout: the
// component passes it to Limits.ServerOptions.
type ConnAuthenticator interface {
	// ConnAuthenticated reports whether the connection of ctx (a
	// connection's context, with its gRPC peer and no call's metadata) is
	// authenticated by itself: by a verified client certificate that names
	// an identity, or because the server authenticates nobody.
	ConnAuthenticated(ctx context.Context) bool
	// ConnAuthTimedOut is told of each connection of ctx that the bound
	// closes for not authenticating within AuthTimeout, after it is
	// counted, to log it.
	ConnAuthTimedOut(ctx context.Context)
}

// The states of a connection's authentication (boundConn.auth).
const (
	authPending  int32 = iota // within AuthTimeout, not authenticated yet
	authDone                  // authenticated: AuthTimeout no longer applies
	authTimedOut              // closed for not authenticating in time
)

// Authenticated marks c as authenticated, so that AuthTimeout no longer
// applies to it (connauth.Conn): package auth's interceptor calls it,
// through connauth.Authenticated, on every call whose caller it
// identified. Once c is marked it costs an atomic load.
func (c *boundConn) Authenticated() {
	if c.auth.Load() == authPending && c.auth.CompareAndSwap(authPending, authDone) {
		c.stopAuthTimer()
	}
}

// stopAuthTimer stops c's AuthTimeout, if one runs.
func (c *boundConn) stopAuthTimer() {
	if t := c.authTimer.Load(); t != nil {
		t.Stop()
	}
}

// WatchAuth makes b close the connections that a does not find
// authenticated within AuthTimeout. Limits.ServerOptions calls it for a
// gRPC server; a server of another kind (the router's HTTP API) calls it
// and serves with b.ConnContext. Call it before serving.
func (b *ConnBound) WatchAuth(a ConnAuthenticator) { b.auth = a }

// TagConn starts the AuthTimeout of a connection that gRPC has set up (TLS
// handshake and HTTP/2 preface done), unless its certificate authenticates
// it at once, and gives its context the connection (connauth.NewContext).
// ConnBound is a stats.Handler for this (Limits.ServerOptions registers
// it) and ignores every other event.
func (b *ConnBound) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if b.auth == nil || info.RemoteAddr == nil {
		return ctx
	}
	c := b.lookup(info.RemoteAddr.String())
	if c == nil {
		return ctx
	}
	// gRPC gives the connection's context its peer, certificate included.
	return b.watch(ctx, c, func() context.Context { return ctx })
}

// ConnContext is an http.Server's ConnContext that starts the AuthTimeout
// of each connection that b's listener accepted (under TLS or not), from
// accept, and gives its context (the base of its requests') the connection
// (connauth.NewContext). Its client certificate, known only once the TLS
// handshake is done, is judged when the timeout ends. Without WatchAuth it
// returns ctx.
func (b *ConnBound) ConnContext(ctx context.Context, conn net.Conn) context.Context {
	c := boundOf(conn)
	if b.auth == nil || c == nil {
		return ctx
	}
	return b.watch(ctx, c, func() context.Context {
		p := &peer.Peer{Addr: conn.RemoteAddr()}
		if t, ok := conn.(*tls.Conn); ok {
			p.AuthInfo = credentials.TLSInfo{State: t.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
		}
		return peer.NewContext(ctx, p)
	})
}

// watch starts c's AuthTimeout, unless it is authenticated already, and
// returns ctx carrying c. peerCtx returns the connection's context with
// its gRPC peer as it stands, for the ConnAuthenticator.
func (b *ConnBound) watch(ctx context.Context, c *boundConn, peerCtx func() context.Context) context.Context {
	if b.auth.ConnAuthenticated(peerCtx()) {
		c.auth.Store(authDone)
	} else {
		c.authTimer.Store(time.AfterFunc(b.authTimeout, func() { b.authExpired(peerCtx, c) }))
	}
	return connauth.NewContext(ctx, c)
}

// authExpired closes c, counts it and has it logged, unless it has
// authenticated meanwhile, by a call or by a certificate (whose grant may
// have come since it connected).
func (b *ConnBound) authExpired(peerCtx func() context.Context, c *boundConn) {
	if c.auth.Load() != authPending {
		return
	}
	ctx := peerCtx()
	if b.auth.ConnAuthenticated(ctx) {
		c.auth.CompareAndSwap(authPending, authDone)
		return
	}
	if !c.auth.CompareAndSwap(authPending, authTimedOut) {
		return
	}
	b.refused[RefusedAuthTimeout].Inc()
	b.auth.ConnAuthTimedOut(ctx)
	_ = c.Close()
}

// HandleConn is a no-op of stats.Handler: a connection's AuthTimeout
// stops when it is closed.
func (b *ConnBound) HandleConn(context.Context, stats.ConnStats) {}

// TagRPC is a no-op of stats.Handler.
func (b *ConnBound) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC is a no-op of stats.Handler.
func (b *ConnBound) HandleRPC(context.Context, stats.RPCStats) {}
