package rpc

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

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
// gRPC server (Listen then starts each connection's AuthTimeout when its
// TLS handshake is done, and ServerOptions' interceptors give each call
// its connection to mark); a server of another kind (the router's HTTP
// API) calls it and serves with b.ConnContext. Call it before serving.
func (b *ConnBound) WatchAuth(a ConnAuthenticator) { b.auth = a }

// creds wraps a gRPC server's TLS credentials so that each connection's
// AuthTimeout starts when its TLS handshake is done (Listen applies it).
func (b *ConnBound) creds(tc credentials.TransportCredentials) credentials.TransportCredentials {
	return authCreds{TransportCredentials: tc, b: b}
}

type authCreds struct {
	credentials.TransportCredentials
	b *ConnBound
}

// ServerHandshake does the TLS handshake, then starts the AuthTimeout of a
// connection that b's listener accepted, unless its certificate
// authenticates it at once.
func (a authCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := a.TransportCredentials.ServerHandshake(raw)
	if c := boundOf(raw); err == nil && a.b.auth != nil && c != nil {
		p := &peer.Peer{Addr: raw.RemoteAddr(), AuthInfo: info}
		a.b.watch(c, func() context.Context { return peer.NewContext(context.Background(), p) })
	}
	return conn, info, err
}

func (a authCreds) Clone() credentials.TransportCredentials {
	return authCreds{TransportCredentials: a.TransportCredentials.Clone(), b: a.b}
}

// tag gives a call's context its connection (connauth.NewContext), for the
// auth interceptor to mark, while the connection is not authenticated;
// once it is, the call costs a map lookup and nothing more.
func (b *ConnBound) tag(ctx context.Context) context.Context {
	if b.auth == nil {
		return ctx
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ctx
	}
	// gRPC's peer address is the one the listener accepted (the same
	// value, through TLS), the key of b.conns.
	v, ok := b.conns.Load(p.Addr)
	if !ok {
		return ctx
	}
	if c := v.(*boundConn); c.auth.Load() == authPending {
		return connauth.NewContext(ctx, c)
	}
	return ctx
}

// unary and stream are the interceptors that tag calls; Limits.ServerOptions
// puts them ahead of the component's (the auth interceptors).
func (b *ConnBound) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(b.tag(ctx), req)
}

func (b *ConnBound) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if ctx := b.tag(ss.Context()); ctx != ss.Context() {
		ss = taggedStream{ServerStream: ss, ctx: ctx}
	}
	return handler(srv, ss)
}

type taggedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s taggedStream) Context() context.Context { return s.ctx }

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
	b.watch(c, func() context.Context {
		p := &peer.Peer{Addr: conn.RemoteAddr()}
		if t, ok := conn.(*tls.Conn); ok {
			p.AuthInfo = credentials.TLSInfo{State: t.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
		}
		return peer.NewContext(ctx, p)
	})
	return connauth.NewContext(ctx, c)
}

// watch starts c's AuthTimeout, unless it is authenticated already.
// peerCtx returns a context with the connection's gRPC peer as it stands,
// for the ConnAuthenticator.
func (b *ConnBound) watch(c *boundConn, peerCtx func() context.Context) {
	if b.auth.ConnAuthenticated(peerCtx()) {
		c.auth.Store(authDone)
		return
	}
	c.authTimer.Store(time.AfterFunc(b.authTimeout, func() { b.authExpired(peerCtx, c) }))
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
