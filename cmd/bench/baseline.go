package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/rpc"
)

// BaselineServer is the no-op server of --baseline: it serves the public
// API and Envoy's API on 127.0.0.1 and allows every check with an answer of
// the same shape a router gives (limit, remaining, reset and rule filled
// in), decided by nothing. It measures what the client, gRPC and the
// machine cost, so that a router's figures can be read as a ratio of it.
type BaselineServer struct{ srv *rpc.Server }

// Baseline answers' figures: a rule of 100 per minute, as the sample rules'.
const (
	baselineRule      = "baseline"
	baselineLimit     = 100
	baselineRemaining = 99
	baselineReset     = 600 * time.Millisecond
)

// StartBaseline starts a no-op server on addr (host:port; port 0 picks a
// free one), built by the same helper as the router's server (rpc.Listen),
// with TLS when tlsCfg is set, else in plain text.
func StartBaseline(addr string, tlsCfg *tls.Config) (*BaselineServer, error) {
	srv, err := rpc.Listen(addr, tlsCfg)
	if err != nil {
		return nil, err
	}
	shardlimitv1.RegisterRateLimiterServer(srv, noopPublic{})
	rlsv3.RegisterRateLimitServiceServer(srv, noopEnvoy{})
	srv.Serve()
	return &BaselineServer{srv: srv}, nil
}

// Addr returns the address the server listens on.
func (s *BaselineServer) Addr() string { return s.srv.Addr() }

// Stop stops the server at once.
func (s *BaselineServer) Stop() { s.srv.Kill() }

type noopPublic struct {
	shardlimitv1.UnimplementedRateLimiterServer
}

func (noopPublic) Check(_ context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	return &shardlimitv1.CheckResponse{Decisions: noopDecisions(len(req.Checks))}, nil
}

// CheckStream answers each message at once, in order, as Check would.
func (noopPublic) CheckStream(s grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) error {
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&shardlimitv1.CheckStreamResponse{Id: req.Id, Decisions: noopDecisions(len(req.Checks))}); err != nil {
			return err
		}
	}
}

func noopDecisions(n int) []*shardlimitv1.Decision {
	ds := make([]*shardlimitv1.Decision, n)
	for i := range ds {
		ds[i] = &shardlimitv1.Decision{
			Allowed: true, Limit: baselineLimit, Remaining: baselineRemaining,
			ResetAfter: durationpb.New(baselineReset), Rule: baselineRule,
		}
	}
	return ds
}

type noopEnvoy struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (noopEnvoy) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	sts := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.Descriptors))
	for i := range sts {
		sts[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
			Code: rlsv3.RateLimitResponse_OK,
			CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{
				Name: baselineRule, RequestsPerUnit: baselineLimit, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE,
			},
			LimitRemaining:     baselineRemaining,
			DurationUntilReset: durationpb.New(baselineReset),
		}
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: sts}, nil
}
