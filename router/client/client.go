package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/rpc/redial"
	"github.com/shardlimit/shardlimit/shard/rpc/vtcodec"
)

// Client asks routers for decisions. It is safe for concurrent use.
type Client struct {
	opts    Options
	conns   []*grpc.ClientConn
	stubs   []shardlimitv1.RateLimiterClient
	next    atomic.Uint64
	batch   *batcher  // nil when BatchWindow is 0
	stream  *streamer // nil unless Options.Stream
	closed  atomic.Bool
	metrics *metrics

	// rand draws backoffs; rand.Int64N unless a test replaces it.
	rand func(n int64) int64
	// skipFailing skips routers whose connection is in transient failure
	// while another is usable; tests of the retry path turn it off.
	skipFailing bool
	// lastLog and suppressed throttle the failure-mode log line.
	lastLog    atomic.Int64
	suppressed atomic.Int64
}

// New validates opts and creates a client. Connections are opened in the
// background; New does not wait for any router.
func New(opts Options) (*Client, error) {
	opts.fill()
	if err := opts.fromEnv(); err != nil {
		return nil, fmt.Errorf("shardlimit client: %w", err)
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("shardlimit client: %w", err)
	}
	transport := insecure.NewCredentials()
	if opts.TLS != nil {
		transport = credentials.NewTLS(opts.TLS)
	}
	// A router that comes back, or a network that heals, is dialed again
	// within about a second, and a connection a cut network left silent
	// is closed after 5 s (see package redial). The dialer turns gRPC's
	// proxy support off: a dialer in opts.DialOptions replaces it.
	// The connections encode with vtprotobuf's code (package vtcodec), set
	// on them alone: gRPC's codec stays as it was for the rest of the
	// program.
	dial := []grpc.DialOption{grpc.WithTransportCredentials(transport), grpc.WithStatsHandler(streamHandler{}),
		grpc.WithConnectParams(redial.ConnectParams), redial.DialerWith(redial.ClientUnackedTimeout), vtcodec.CallerDialOption()}
	if opts.Token != nil {
		dial = append(dial, grpc.WithPerRPCCredentials(creds.PerRPC(opts.Token)))
	}
	dial = append(dial, opts.DialOptions...)
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("shardlimit client: registerer: %w", err)
	}
	c := &Client{opts: opts, rand: rand.Int64N, skipFailing: true, metrics: m}
	for _, addr := range opts.Routers {
		// passthrough: the address is dialed as given, one connection per
		// router; the client balances over them itself.
		conn, err := grpc.NewClient("passthrough:///"+addr, dial...)
		if err != nil {
			c.closeConns()
			return nil, fmt.Errorf("shardlimit client: router %s: %w", addr, err)
		}
		conn.Connect()
		c.conns = append(c.conns, conn)
		c.stubs = append(c.stubs, shardlimitv1.NewRateLimiterClient(conn))
	}
	if opts.BatchWindow > 0 {
		c.batch = &batcher{c: c, window: opts.BatchWindow, max: opts.MaxBatch}
	}
	if opts.Stream {
		c.stream = newStreamer(c)
	}
	return c, nil
}

// FailureMode returns the client's failure mode.
func (c *Client) FailureMode() FailureMode { return c.opts.FailureMode }

// Check decides one check of user with cost hits (0 reads without
// consuming). See CheckOne.
func (c *Client) Check(ctx context.Context, service, endpoint, user string, hits int64) (Decision, error) {
	return c.CheckOne(ctx, Check{Service: service, Endpoint: endpoint, User: user, Hits: hits})
}

// CheckOne decides one check within Options.Timeout (or ctx's earlier
// deadline). When no router answers by then, or the answer is an error
// other than those below, it returns the failure-mode decision
// (FromFailureMode) and a nil error. It returns an error only for an invalid
// check (ErrInvalidCheck), an unknown service (ErrUnknownService), a
// router's UNAUTHENTICATED or PERMISSION_DENIED, a canceled ctx, or a closed
// client. With Options.BatchWindow set, concurrent calls share RPCs; with
// Options.Stream, they share messages on a CheckStream.
func (c *Client) CheckOne(ctx context.Context, chk Check) (Decision, error) {
	start := time.Now()
	d, err := c.checkOne(ctx, chk)
	if c.metrics.duration != nil {
		c.metrics.observe(start, []Decision{d}, err)
	}
	return d, err
}

func (c *Client) checkOne(ctx context.Context, chk Check) (Decision, error) {
	if c.closed.Load() {
		return Decision{}, ErrClosed
	}
	if err := chk.validate(0); err != nil {
		return Decision{}, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	if c.batch == nil && c.stream == nil {
		ds, err := c.decide(parent, ctx, []*shardlimitv1.Check{chk.proto()})
		if err != nil {
			return Decision{}, err
		}
		return ds[0], nil
	}
	deadline, _ := ctx.Deadline()
	w := &waiter{check: chk.proto(), deadline: deadline, done: make(chan result, 1)}
	if c.stream != nil {
		w.trace = traceContext(ctx)
		if !c.stream.add(w) {
			err := status.Error(codes.ResourceExhausted, "too many checks wait for the stream")
			c.logFailure(err)
			return c.failureDecision(), nil
		}
	} else if err := c.batch.add(w); err != nil {
		return Decision{}, err
	}
	select {
	case r := <-w.done:
		if r.err == nil && r.decision.FromFailureMode {
			// As a unary call's callerError: a caller that gave up gets
			// its context's error, not the failure mode's answer.
			if err := parent.Err(); errors.Is(err, context.Canceled) {
				return Decision{}, fmt.Errorf("shardlimit client: %w", err)
			}
		}
		return r.decision, r.err
	case <-ctx.Done():
		if err := parent.Err(); errors.Is(err, context.Canceled) {
			return Decision{}, fmt.Errorf("shardlimit client: %w", err)
		}
		c.logFailure(ctx.Err())
		return c.failureDecision(), nil
	}
}

// CheckBatch decides checks in one RPC, answered in order, under the same
// rules as CheckOne. As in the public API, a batch with any invalid check
// is rejected whole and nothing is counted. It is never coalesced with
// other calls and is not bounded by MaxBatch (the routers bound it).
func (c *Client) CheckBatch(ctx context.Context, checks []Check) ([]Decision, error) {
	start := time.Now()
	ds, err := c.checkBatch(ctx, checks)
	c.metrics.observe(start, ds, err)
	return ds, err
}

func (c *Client) checkBatch(ctx context.Context, checks []Check) ([]Decision, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if len(checks) == 0 {
		return nil, fmt.Errorf("%w: checks: at least 1 check is required", ErrInvalidCheck)
	}
	req := make([]*shardlimitv1.Check, len(checks))
	for i := range checks {
		if err := checks[i].validate(i); err != nil {
			return nil, err
		}
		req[i] = checks[i].proto()
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.decide(parent, ctx, req)
}

// Close closes the connections. Calls waiting in a batch and later calls
// return ErrClosed.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if c.batch != nil {
		c.batch.close()
	}
	if c.stream != nil {
		c.stream.close()
	}
	return c.closeConns()
}

func (c *Client) closeConns() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// decide sends checks and turns the outcome into decisions or an error.
// parent is the caller's context, to tell its cancellation apart from a
// deadline; ctx carries the call's deadline.
func (c *Client) decide(parent, ctx context.Context, checks []*shardlimitv1.Check) ([]Decision, error) {
	resp, err := c.call(ctx, &shardlimitv1.CheckRequest{Checks: checks})
	return c.outcome(parent, len(checks), resp, err)
}

// outcome turns the answer to n checks into decisions, or into the error the
// caller gets, or into failure-mode decisions when no router answered.
func (c *Client) outcome(parent context.Context, n int, resp *shardlimitv1.CheckResponse, err error) ([]Decision, error) {
	if err == nil && len(resp.Decisions) != n {
		err = status.Errorf(codes.Internal, "router answered %d decisions for %d checks", len(resp.Decisions), n)
	}
	ds := make([]Decision, n)
	if err == nil {
		for i, d := range resp.Decisions {
			ds[i] = fromProto(d)
		}
		return ds, nil
	}
	if err := c.callerError(parent, err); err != nil {
		return nil, err
	}
	c.logFailure(err)
	for i := range ds {
		ds[i] = c.failureDecision()
	}
	return ds, nil
}

// callerError returns the error the caller gets for err, or nil when err
// means that no router answered in time and the failure mode answers.
func (c *Client) callerError(parent context.Context, err error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if perr := parent.Err(); errors.Is(perr, context.Canceled) {
		return fmt.Errorf("shardlimit client: %w", perr)
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %w", ErrInvalidCheck, err)
	case codes.NotFound:
		return fmt.Errorf("%w: %w", ErrUnknownService, err)
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("shardlimit client: %w", err)
	}
	return nil
}

// call sends req, retrying on the next router while retryable allows and
// the deadline leaves time for the backoff: a request lost with its
// connection once, one never sent as often as MaxAttempts allows.
func (c *Client) call(ctx context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	start := int(c.next.Add(1) - 1)
	var err error
	why, lost := "", false // why the last attempt is sent again; whether one was lost
	for attempt := range c.opts.MaxAttempts {
		if attempt > 0 {
			d := backoff(c.opts.BackoffBase, c.opts.BackoffMax, attempt-1, c.rand)
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
				break
			}
			if !sleep(ctx, d) {
				break
			}
			c.metrics.retry(why)
		}
		t := &tracker{}
		var resp *shardlimitv1.CheckResponse
		resp, err = c.stubs[c.pick(start+attempt)].Check(withTracker(ctx, t), req)
		if err == nil {
			return resp, nil
		}
		why = retryable(err, t)
		if why == "" || (why == retryLost && lost) {
			return nil, err
		}
		lost = lost || why == retryLost
	}
	return nil, err
}

// pick returns the index of the router for attempt i of a call: round
// robin, skipping routers in transient failure while another is not.
func (c *Client) pick(i int) int {
	n := len(c.conns)
	first := i % n
	if !c.skipFailing || n == 1 {
		return first
	}
	for k := range n {
		j := (first + k) % n
		if c.conns[j].GetState() != connectivity.TransientFailure {
			return j
		}
	}
	return first
}

func (c *Client) failureDecision() Decision {
	d := Decision{Allowed: c.opts.FailureMode == FailOpen, FromFailureMode: true}
	if !d.Allowed {
		d.RetryAfter = FailClosedRetryAfter
	}
	return d
}

// logFailure logs at most one line a second about answers by failure mode.
func (c *Client) logFailure(err error) {
	c.metrics.failure(err)
	now := time.Now().UnixNano()
	last := c.lastLog.Load()
	if now-last < int64(time.Second) || !c.lastLog.CompareAndSwap(last, now) {
		c.suppressed.Add(1)
		return
	}
	c.opts.Logger.Warn("no shardlimit router answered in time; answering by failure mode",
		"failure_mode", c.opts.FailureMode.String(), "err", err, "also_since_last_line", c.suppressed.Swap(0))
}
