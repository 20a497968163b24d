package component

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// Config is what every server's options hold: router.Options,
// shard.Options and rebalance.Options embed it. Every zero field means its
// default.
type Config struct {
	// Etcd lists the etcd endpoints. Required.
	Etcd []string
	// Prefix is the etcd key prefix; default DefaultPrefix.
	Prefix string
	// EtcdTLS secures the etcd connection; default nil: plain text.
	EtcdTLS *tls.Config
	// TLS is the gRPC server's TLS config (creds.ServerTLS). The shard and
	// the rebalance job require callers' client certificates; the router
	// verifies one if given, since token callers hold none. Required
	// unless Insecure.
	TLS *tls.Config
	// ShardTLS secures the calls to shards (and a router's to the
	// rebalance leader), with a client certificate of an identity granted
	// the internal role (creds.ClientTLS). Required unless Insecure; a
	// shard needs it whenever TLS is set, to pull counters from the
	// others when it joins and drains.
	ShardTLS *tls.Config
	// Insecure serves without authentication (and without TLS where TLS or
	// ShardTLS is nil): every caller may call every method. Default false:
	// every call is authorized by the grants; Start logs a warning and sets
	// shardlimit_<component>_insecure to 1 when true.
	Insecure bool
	// GrantsFile is a grants file (auth.ParseFile) read at start; its
	// grants are added to, and win over, those stored in etcd, which are
	// followed and apply within a second. Default "" (etcd's only).
	GrantsFile string
	// Grants, when non-nil, are used like the grants of GrantsFile (tests).
	Grants []auth.Grant
	// Limits bound the gRPC server's connections, streams and messages;
	// default rpc.DefaultLimits() (each zero field its default).
	Limits rpc.Limits
	// Registry receives the component's metrics; default a new one. The
	// binary passes its own, to serve /metrics while the component is
	// still starting.
	Registry *prometheus.Registry
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Tracer is where the component's spans go (tracing.Start's
	// TracerProvider); default nil: tracing off, no span is made.
	Tracer trace.TracerProvider
}

// DefaultPrefix is the etcd key prefix of Config.Prefix's default.
const DefaultPrefix = "/shardlimit/"

// DefaultConfig returns the defaults, without the required Etcd.
func DefaultConfig() Config {
	return Config{Prefix: DefaultPrefix, Limits: rpc.DefaultLimits()}
}

// Fill sets every zero field to its default.
func (c *Config) Fill() {
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	c.Limits.Fill()
}

// Validate reports the first field out of bounds, naming it: etcd, tls
// (unless Insecure) and the limits. Each component checks the rest of its
// TLS (whether it verifies clients, ShardTLS) after it.
func (c *Config) Validate() error {
	switch {
	case len(c.Etcd) == 0:
		return fmt.Errorf("etcd: at least one endpoint is required")
	case !c.Insecure && c.TLS == nil:
		return fmt.Errorf("tls: required (a certificate, its key and a CA that verifies callers), unless insecure")
	}
	return c.Limits.Validate()
}

// Authorizer reads GrantsFile into Grants (unless Grants is set) and
// returns the authorizer of component ("router", "shard" or "rebalance"),
// which follows the grants in etcd once grantstore.Follow feeds it.
func (c *Config) Authorizer(component string) (*auth.Authorizer, error) {
	if c.Grants == nil && c.GrantsFile != "" {
		var err error
		if c.Grants, err = auth.ParseFile(c.GrantsFile); err != nil {
			return nil, fmt.Errorf("grants file: %w", err)
		}
	}
	return auth.New(auth.Options{Component: component, Registry: c.Registry, Logger: c.Logger, Insecure: c.Insecure})
}

// Dial returns a client of etcd.
func (c *Config) Dial() (*clientv3.Client, error) { return etcd.Dial(c.Etcd, c.EtcdTLS) }

// Layout returns the etcd keys under Prefix.
func (c *Config) Layout() etcd.Layout { return etcd.Layout(c.Prefix) }

// ServerOptions returns the options of component's gRPC server, for
// rpc.Listen: its limits, metered in its registry, its authorizer's
// interceptors, and tracing.
func (c *Config) ServerOptions(component string, authz *auth.Authorizer) []grpc.ServerOption {
	opts := append(c.Limits.ServerOptions(c.Registry, component, authz), authz.ServerOptions()...)
	return append(opts, tracing.ServerOptions(c.Tracer)...)
}
