package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/shardlimit/shardlimit/shard/rpc/connauth"
)

// Options configure an Authorizer.
type Options struct {
	// Component names the server in metric names:
	// shardlimit_<component>_auth_refusals_total. Required: router, shard
	// or rebalance.
	Component string
	// Registry receives the metrics; default none (not exported).
	Registry prometheus.Registerer
	// Logger receives refusals, at most one line per reason per LogEvery;
	// default slog.Default().
	Logger *slog.Logger
	// LogEvery is the least time between two log lines of one reason; the
	// next line counts those suppressed in between. Default 10s.
	LogEvery time.Duration
	// Now is the clock that token expiry is judged by; default time.Now.
	Now func() time.Time
	// Insecure lets every call through without credentials, as a caller
	// that may do anything (--insecure); default false. The servers log a
	// warning and set shardlimit_<component>_insecure to 1.
	Insecure bool
}

// Authorizer decides every call of one gRPC server: who is calling (a
// bearer token, else the verified client certificate) and whether the
// method table lets its role call the method. It holds the grants in force
// and swaps them whole.
type Authorizer struct {
	opts     Options
	grants   atomic.Pointer[Set]
	refusals *refusals
	insecure *Identity
}

// New returns an Authorizer with no grants: until SetGrants, only methods
// open to anyone pass (or every call, when Insecure).
func New(o Options) (*Authorizer, error) {
	if o.Component == "" || strings.ContainsAny(o.Component, " -/") {
		return nil, fmt.Errorf("component: %q is not a metric name part (router, shard, rebalance)", o.Component)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LogEvery == 0 {
		o.LogEvery = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Authorizer{opts: o}
	a.grants.Store(NewSet())
	var err error
	if a.refusals, err = newRefusals(o); err != nil {
		return nil, err
	}
	if o.Insecure {
		a.insecure = &Identity{ID: "insecure", Role: roleUnchecked}
		a.refusals.insecure.Set(1)
		o.Logger.Warn("running INSECURE: no caller is authenticated and every call is allowed (--insecure); never do this outside development")
	}
	return a, nil
}

// SetGrants puts a new set of grants in force for the calls that start
// from now on, and for the next message of a stream whose handler asks
// Caller.Current; invalid is how many stored grants were left out as
// invalid, for the metric.
func (a *Authorizer) SetGrants(s *Set, invalid int) {
	a.grants.Store(s)
	a.refusals.grants.Set(float64(s.Len()))
	a.refusals.invalid.Set(float64(invalid))
}

// GrantsSynced records that the grants in force matched etcd at t: the
// metric shardlimit_<component>_grants_last_sync_timestamp_seconds.
func (a *Authorizer) GrantsSynced(t time.Time) {
	a.refusals.synced.Set(float64(t.UnixNano()) / 1e9)
}

// Grants returns the grants in force.
func (a *Authorizer) Grants() *Set { return a.grants.Load() }

// ServerOptions returns the interceptors to build the gRPC server with: one
// for unary calls and one for streams, deciding alike. The interceptors
// mark the connection of every call whose caller they identify as
// authenticated (package connauth), for --auth-timeout; the Authorizer is
// the server's rpc.ConnAuthenticator too (rpc.Limits.ServerOptions).
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream)}
}

// ConnAuthenticated reports whether the connection of ctx is authenticated
// by itself, as rpc.ConnAuthenticator: its verified client certificate
// names an identity of the grants in force, or the server is Insecure.
func (a *Authorizer) ConnAuthenticated(ctx context.Context) bool {
	if a.insecure != nil {
		return true
	}
	id, _, _, _ := a.identify(ctx, a.grants.Load())
	return id != nil
}

// ConnAuthTimedOut logs a connection closed for not authenticating in
// time, at most one line per LogEvery, as rpc.ConnAuthenticator.
func (a *Authorizer) ConnAuthTimedOut(ctx context.Context) {
	var addr net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
	}
	a.refusals.connTimedOut(addr)
}

// Unary is the unary server interceptor.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, err := a.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, callerKey{}, c), req)
}

// Stream is the stream server interceptor.
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, err := a.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &stream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callerKey{}, c)})
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// Reasons a call is refused: the label values of the refusals metric.
const (
	// ReasonNoCredentials: neither a token nor a verified client
	// certificate (Unauthenticated).
	ReasonNoCredentials = "no_credentials"
	// ReasonUnknownCredentials: a token or certificate that no grant names
	// (Unauthenticated).
	ReasonUnknownCredentials = "unknown_credentials"
	// ReasonRole: a known caller whose role may not call the method
	// (PermissionDenied).
	ReasonRole = "role"
	// ReasonService: a known caller acting for a service outside its grant
	// (PermissionDenied).
	ReasonService = "service"
	// ReasonMethod: a method the table does not know (PermissionDenied).
	ReasonMethod = "method"
)

// authorize identifies the caller and checks the method table.
func (a *Authorizer) authorize(ctx context.Context, fullMethod string) (*Caller, error) {
	perm, api, known := PermissionOf(fullMethod)
	if !known {
		api = "unknown" // a label and a log field must not carry what a caller made up
	}
	c := &Caller{a: a, api: api, method: fullMethod, known: known}
	if p, ok := peer.FromContext(ctx); ok {
		c.peer = p.Addr // formatted only if the call is refused
	}
	if a.insecure != nil {
		c.Identity = a.insecure
		return c, nil
	}
	if known && perm&Anyone != 0 {
		// Identified or not, it may call; it does not authenticate the
		// connection (--auth-timeout), so an anonymous Health Check
		// cannot hold one open.
		return c, nil
	}
	set := a.grants.Load()
	id, reason, expires, err := a.identify(ctx, set)
	if err != nil {
		return nil, a.refuse(c, reason, codes.Unauthenticated, err.Error())
	}
	connauth.Authenticated(ctx) // a known caller: its connection may stay
	c.Identity, c.set, c.expires = id, set, expires
	switch {
	case !known:
		return nil, a.refuse(c, ReasonMethod, codes.PermissionDenied, "this method is not open to any caller")
	case !perm.allows(id.Role):
		return nil, a.refuse(c, ReasonRole, codes.PermissionDenied, fmt.Sprintf("role %s may not call %s (needs %s)", id.Role, fullMethod, perm))
	}
	return c, nil
}

// identify returns the caller's identity in set: the bearer token's, when the
// call carries one (it must then be known and unexpired, whatever the
// certificate), else the verified client certificate's, by its SAN URIs
// among URI grants first and its DNS names among DNS grants next
// (Set.Certificate). expires is when a token's identity stops holding
// (zero: never, or a certificate).
func (a *Authorizer) identify(ctx context.Context, set *Set) (id *Identity, reason string, expires time.Time, err error) {
	if vals := metadata.ValueFromIncomingContext(ctx, "authorization"); len(vals) > 0 {
		token, ok := bearer(vals[0])
		if !ok || len(vals) > 1 {
			return nil, ReasonUnknownCredentials, time.Time{}, fmt.Errorf("the authorization metadata must be one \"Bearer <token>\"")
		}
		id, expires, err := set.Token(token, a.opts.Now())
		if err != nil {
			return nil, ReasonUnknownCredentials, time.Time{}, err
		}
		return id, "", expires, nil
	}
	p, ok := peer.FromContext(ctx)
	var chains [][]*x509.Certificate
	if ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			chains = info.State.VerifiedChains
		}
	}
	if len(chains) == 0 || len(chains[0]) == 0 {
		return nil, ReasonNoCredentials, time.Time{}, fmt.Errorf("no credentials: present a client certificate or an \"authorization: Bearer <token>\" header")
	}
	leaf := chains[0][0]
	if id := set.Certificate(leaf.URIs, leaf.DNSNames); id != nil {
		return id, "", time.Time{}, nil
	}
	return nil, ReasonUnknownCredentials, time.Time{}, fmt.Errorf("no grant names this client certificate")
}

// bearer returns the token of an "authorization: Bearer <token>" value.
func bearer(v string) (string, bool) {
	const scheme = "bearer "
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	t := strings.TrimSpace(v[len(scheme):])
	return t, t != ""
}

// refuse counts and logs a refusal and returns its status. The message
// names no service and echoes no credential.
func (a *Authorizer) refuse(c *Caller, reason string, code codes.Code, msg string) error {
	if a != nil {
		a.refusals.record(c, reason)
	}
	return status.Error(code, msg)
}

type callerKey struct{}

// Caller is who is calling, as the interceptor put it in the call's
// context: its identity (nil for a method open to anyone called without
// credentials) and what it called.
type Caller struct {
	*Identity
	a      *Authorizer
	api    string // the gRPC service, or "unknown"
	method string
	peer   net.Addr
	known  bool
	// set is the grant set Identity was found in, and expires when its
	// token stops holding (zero: never); nil when the caller was not
	// identified (insecure, a method open to anyone, in process).
	set     *Set
	expires time.Time
}

// Current returns the caller as the grants in force identify it now, for
// a stream whose messages each act on the caller's grant: c itself while
// the grant set it was identified against is still in force and its token
// has not expired, else c identified again against the grants in force
// and the method table, from ctx, the stream's context. A caller no longer
// allowed gets its refusal, counted and logged as at the call's start.
func (c *Caller) Current(ctx context.Context) (*Caller, error) {
	if c == nil || c.set == nil || c.a == nil {
		return c, nil
	}
	if c.a.grants.Load() == c.set && (c.expires.IsZero() || c.a.opts.Now().Before(c.expires)) {
		return c, nil
	}
	return c.a.authorize(ctx, c.method)
}

// WithCaller returns ctx carrying c as its caller, as the interceptor
// puts it: for a stream handler that identified its caller again
// (Current).
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// FromContext returns the caller of the call ctx belongs to, or nil when
// no Authorizer decided it.
func FromContext(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// NewContext returns ctx carrying id as its caller, as the interceptor
// puts it, for handlers called in process with no gRPC server in front
// (tests of handlers). Refusals of such a caller are not counted.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, callerKey{}, &Caller{Identity: id, api: "in-process", method: "in-process", known: true})
}

// MayUse returns nil when the caller may act for service, else a
// PermissionDenied status, counted and logged as a refusal of reason
// service. Handlers of the methods the table opens to the service role
// call it for every service a request names. A nil Caller (no Authorizer
// in front of the handler) may use nothing: it fails closed.
func (c *Caller) MayUse(service string) error {
	if c == nil {
		return status.Error(codes.Unauthenticated, "the server decided no caller")
	}
	if c.Identity.Allows(service) {
		return nil
	}
	if c.Identity == nil {
		return c.a.refuse(c, ReasonNoCredentials, codes.Unauthenticated, "no credentials")
	}
	return c.a.refuse(c, ReasonService, codes.PermissionDenied, "the caller's grant does not hold a service this request names")
}

// Allows reports whether the caller may act for service, without
// recording anything: for filtering what a caller reads.
func (c *Caller) Allows(service string) bool { return c != nil && c.Identity.Allows(service) }

// IsOperator reports whether the caller may act for every service.
func (c *Caller) IsOperator() bool {
	return c != nil && c.Identity != nil && (c.Role == RoleOperator || c.Role == roleUnchecked)
}

// Name returns the caller's identity id for logs, or "" when unknown.
func (c *Caller) Name() string {
	if c == nil || c.Identity == nil {
		return ""
	}
	return c.ID
}
