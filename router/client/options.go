package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/creds"
)

// FailureMode is the client's answer when no router answers in time.
type FailureMode int

const (
	// FailOpen allows the check (the default, like a rule's default
	// failure policy).
	FailOpen FailureMode = iota
	// FailClosed denies the check, with RetryAfter FailClosedRetryAfter.
	FailClosed
)

// FailClosedRetryAfter is the RetryAfter of a check denied by FailClosed.
const FailClosedRetryAfter = time.Second

func (m FailureMode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// ParseFailureMode parses "open" or "closed", the flag form.
func ParseFailureMode(s string) (FailureMode, error) {
	switch s {
	case "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("failure mode %q is not open or closed", s)
}

// Options configure a Client. The zero value of every field but Routers
// means its default.
type Options struct {
	// Routers lists the routers' gRPC addresses, host:port. Required: at
	// least one. Calls are spread over them round robin; a router whose
	// connection is failing is skipped while another is usable.
	Routers []string
	// Timeout bounds each Check, CheckOne and CheckBatch call, retries and
	// batching wait included; default 50ms. A shorter deadline on the
	// caller's context wins.
	Timeout time.Duration
	// FailureMode is the answer when no router answers in time; default
	// FailOpen.
	FailureMode FailureMode
	// BatchWindow is how long a Check or CheckOne call waits for others to
	// share one RPC; default 0: no coalescing, one RPC per call. CheckBatch
	// is never coalesced. Must be under Timeout.
	BatchWindow time.Duration
	// Stream sends the checks of Check and CheckOne calls over the routers'
	// CheckStream instead of one unary Check each: a check goes out at
	// once when fewer than two messages are in flight (no added wait when
	// idle), and the checks of calls made while two are in flight leave
	// together in the next message, up to MaxBatch. Decisions, errors,
	// failure mode, retries, metrics and tracing are as for unary calls.
	// Default false. Not with BatchWindow. CheckBatch stays unary.
	Stream bool
	// MaxBatch is the most checks coalesced into one RPC, or into one
	// message of a stream (Stream): a batch that reaches it is sent at
	// once; default 100. Keep it at or under the
	// routers' max checks per request (1000 by default).
	MaxBatch int
	// MaxAttempts bounds the attempts of one call, the first included;
	// default 3. 1 disables retries.
	MaxAttempts int
	// BackoffBase is the backoff ceiling before the first retry, doubled for
	// each later one; default 2ms.
	BackoffBase time.Duration
	// BackoffMax caps the backoff ceiling; default 20ms.
	BackoffMax time.Duration
	// TLS is the connections' TLS configuration: the CA that verifies the
	// routers and, when the caller is identified by a certificate, its
	// client certificate (creds.ClientTLS reloads rotated files).
	//
	// When TLS and Token are both nil and Insecure is false, New reads
	// them, and Routers if empty, from the client config file named by
	// $SHARDLIMIT_CONFIG (what `shardlimit dev` writes), and fails when
	// that is unset.
	TLS *tls.Config
	// Token, when set, returns the caller's bearer token, sent as
	// "authorization: Bearer <token>" with every call (TLS only); a
	// service that holds no certificate of its own is identified by it.
	// TokenFile reads one from a file and follows its rotations. Default
	// nil: none.
	Token func(ctx context.Context) (string, error)
	// Insecure calls the routers in plain text without credentials, for
	// routers started with --insecure; default false.
	Insecure bool
	// DialOptions are applied after the client's own (transport
	// credentials, its stats handler), so they can override them, e.g. to
	// plug in other credentials or add interceptors; default none.
	DialOptions []grpc.DialOption
	// Logger receives one throttled line when the client answers by failure
	// mode; default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, gets the client's metrics (shardlimit_client_*:
	// decisions by result, failure-mode answers by reason, call latency,
	// retries by reason; see the package doc); default nil: no metrics. New
	// fails if they are registered there already (one client per
	// registry, or wrap it with prometheus.WrapRegistererWith).
	Registerer prometheus.Registerer
}

// DefaultOptions returns the defaults, without the required Routers.
func DefaultOptions() Options {
	return Options{
		Timeout:     50 * time.Millisecond,
		MaxBatch:    100,
		MaxAttempts: 3,
		BackoffBase: 2 * time.Millisecond,
		BackoffMax:  20 * time.Millisecond,
	}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.Timeout == 0 {
		o.Timeout = d.Timeout
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = d.MaxBatch
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = d.MaxAttempts
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = d.BackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = d.BackoffMax
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// fromEnv fills the credentials, and the routers if none are given, from
// the client config file of $SHARDLIMIT_CONFIG, unless some are given or
// Insecure is set.
func (o *Options) fromEnv() error {
	if o.TLS != nil || o.Token != nil || o.Insecure {
		return nil
	}
	cfg, ok, err := creds.FromEnv()
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("tls: required: set TLS (and Token), or %s to a client config file, or Insecure for routers run with --insecure", creds.EnvConfig)
	}
	if o.TLS, err = cfg.TLS(); err != nil {
		return fmt.Errorf("%s: %w", creds.EnvConfig, err)
	}
	if o.Token, err = cfg.Token(); err != nil {
		return fmt.Errorf("%s: %w", creds.EnvConfig, err)
	}
	if len(o.Routers) == 0 && cfg.Router != "" {
		o.Routers = []string{cfg.Router}
	}
	return nil
}

// TokenFile returns an Options.Token that reads the token in path (a
// mounted secret, or what `shardlimit ctl grants token create` wrote) and
// reads it again when the file changes. It fails when the file is missing
// or empty.
func TokenFile(path string) (func(ctx context.Context) (string, error), error) {
	t, err := creds.NewTokenFile(path)
	if err != nil {
		return nil, err
	}
	return t.Token, nil
}

func (o *Options) validate() error {
	for i, r := range o.Routers {
		if r == "" {
			return fmt.Errorf("routers[%d]: empty address", i)
		}
	}
	switch {
	case len(o.Routers) == 0:
		return fmt.Errorf("routers: at least one router address is required")
	case o.Timeout < time.Millisecond || o.Timeout > time.Minute:
		return fmt.Errorf("timeout: %v not in 1ms..1m", o.Timeout)
	case o.FailureMode != FailOpen && o.FailureMode != FailClosed:
		return fmt.Errorf("failure mode: %v is not FailOpen or FailClosed", o.FailureMode)
	case o.Stream && o.BatchWindow > 0:
		return errors.New("stream and batch window: choose one way of coalescing checks")
	case o.BatchWindow < 0 || o.BatchWindow >= o.Timeout:
		return fmt.Errorf("batch window: %v not in 0..timeout (%v), exclusive", o.BatchWindow, o.Timeout)
	case o.MaxBatch < 1 || o.MaxBatch > 100_000:
		return fmt.Errorf("max batch: %d not in 1..100000", o.MaxBatch)
	case o.MaxAttempts < 1 || o.MaxAttempts > 10:
		return fmt.Errorf("max attempts: %d not in 1..10", o.MaxAttempts)
	case o.BackoffBase < 0 || o.BackoffBase > o.BackoffMax:
		return fmt.Errorf("backoff base: %v not in 0..backoff max (%v)", o.BackoffBase, o.BackoffMax)
	case o.BackoffMax > 10*time.Second:
		return fmt.Errorf("backoff max: %v is over the maximum of 10s", o.BackoffMax)
	case o.Token != nil && o.TLS == nil:
		return fmt.Errorf("token: sent over TLS only: set TLS too")
	case o.TLS == nil && !o.Insecure:
		return fmt.Errorf("tls: required unless Insecure")
	}
	return nil
}
