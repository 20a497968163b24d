package admin

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
	"github.com/shardlimit/shardlimit/shard/mapstore"
)

// leader dials the rebalance leader found in etcd, and returns its
// address too.
func (a *admin) leader(ctx context.Context) (shardlimitv1.RebalancerClient, string, func(), error) {
	addr, err := runstore.Leader(ctx, a.etcd, a.layout)
	if err != nil {
		return nil, "", nil, status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	if addr == "" {
		return nil, "", nil, status.Error(codes.FailedPrecondition, "no rebalance instance leads; start `shardlimit rebalance`")
	}
	conn, err := grpc.NewClient(addr, a.dial...)
	if err != nil {
		return nil, "", nil, status.Errorf(codes.Unavailable, "rebalance leader %s: %v", addr, err)
	}
	return shardlimitv1.NewRebalancerClient(conn), addr, func() { _ = conn.Close() }, nil
}

func (a *admin) RebalancePlan(ctx context.Context, req *shardlimitv1.PlanRequest) (*shardlimitv1.PlanResponse, error) {
	c, _, done, err := a.leader(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return c.Plan(ctx, req)
}

func (a *admin) RebalanceRun(ctx context.Context, req *shardlimitv1.RebalanceRunRequest) (*shardlimitv1.RunResponse, error) {
	fillRunRequest(req)
	c, _, done, err := a.leader(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	resp, err := c.Run(ctx, req.Run)
	if err != nil || !req.Wait {
		return resp, err
	}
	if err := a.routesBy(ctx, resp.Run.MapVersion); err != nil {
		return nil, err
	}
	return resp, nil
}

// fillRunRequest gives a run request its defaults.
func fillRunRequest(req *shardlimitv1.RebalanceRunRequest) {
	if req.Run == nil {
		req.Run = &shardlimitv1.RunRequest{}
	}
	if req.Run.Trigger == "" {
		req.Run.Trigger = "admin"
	}
}

// routesBy waits until this router routes by version (0: at once).
func (a *admin) routesBy(ctx context.Context, version int64) error {
	for a.r.MapVersion() < version {
		select {
		case <-ctx.Done():
			return status.Errorf(codes.DeadlineExceeded, "version %d published, but this router still routes by %d", version, a.r.MapVersion())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (a *admin) ShardMapHistory(ctx context.Context, _ *shardlimitv1.ShardMapHistoryRequest) (*shardlimitv1.ShardMapHistoryResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	hist, err := mapstore.History(ctx, a.etcd, a.layout)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	resp := &shardlimitv1.ShardMapHistoryResponse{InForce: a.r.MapVersion()}
	for _, m := range hist {
		v := &shardlimitv1.ShardMapVersion{
			Version: m.Version, Reason: m.Reason, WrittenUnixNs: m.WrittenAt.UnixNano(), WrittenBy: m.WrittenBy, Pinned: uint32(m.Pinned()),
		}
		for _, mv := range m.Moves {
			v.Moves = append(v.Moves, &shardlimitv1.PlannedMove{Partition: uint32(mv.Partition), From: mv.From, To: mv.To, Load: mv.Load})
		}
		resp.Versions = append(resp.Versions, v)
	}
	return resp, nil
}

func (a *admin) RebalanceRuns(ctx context.Context, req *shardlimitv1.RebalanceRunsRequest) (*shardlimitv1.RebalanceRunsResponse, error) {
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = 20
	case limit > 100:
		return nil, status.Errorf(codes.InvalidArgument, "limit: %d exceeds the maximum of 100", limit)
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	runs, err := runstore.Runs(ctx, a.etcd, a.layout, limit)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	return &shardlimitv1.RebalanceRunsResponse{Runs: runs}, nil
}
