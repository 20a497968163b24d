package router

import (
	"context"
	"crypto/rand"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// RebalanceRunStream has the leader run, as RebalanceRun does, and follows
// the run's record in etcd, which the leader writes as each phase starts
// and ends: every change becomes events (runstore.Events). The record is
// found by the request_id the router gives the request, watched from
// before the request, so that no write is missed. The leader's answer is
// the final record; when the leader is lost before it answers, the stream
// keeps following the record, which the next leader marks abandoned.
func (a *admin) RebalanceRunStream(req *shardlimitv1.RebalanceRunRequest, stream grpc.ServerStreamingServer[shardlimitv1.RebalanceRunEvent]) error {
	ctx := stream.Context()
	fillRunRequest(req)
	if req.Run.RequestId == "" {
		req.Run.RequestId = rand.Text()
	}
	c, addr, done, err := a.leader(ctx)
	if err != nil {
		return err
	}
	defer done()
	layout := etcd.Layout(a.r.opts.Prefix)
	gctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	head, err := a.r.etcd.Get(gctx, layout.Runs(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := a.r.etcd.Watch(clientv3.WithRequireLeader(wctx), layout.Runs(), clientv3.WithPrefix(), clientv3.WithRev(head.Header.Revision+1))

	type answer struct {
		run *shardlimitv1.RunRecord
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := c.Run(ctx, req.Run)
		answered <- answer{resp.GetRun(), err}
	}()
	if err := stream.Send(&shardlimitv1.RebalanceRunEvent{Kind: runstore.EventAsked, Leader: addr, UnixNs: time.Now().UnixNano()}); err != nil {
		return err
	}
	var last *shardlimitv1.RunRecord
	follow := func(rec *shardlimitv1.RunRecord) error {
		for _, ev := range runstore.Events(last, rec) {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		last = rec
		return nil
	}
	for last == nil || !runstore.Finished(last) {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case ans := <-answered:
			answered = nil
			switch {
			case ans.err == nil:
				if err := follow(ans.run); err != nil {
					return err
				}
			case last == nil:
				return ans.err
			}
			// The leader was lost mid-run: go on following the record.
		case wr, ok := <-watch:
			switch {
			case !ok && ctx.Err() != nil:
				return status.FromContextError(ctx.Err()).Err()
			case !ok:
				return status.Error(codes.Unavailable, "etcd: the watch of the run's record ended")
			case wr.Err() != nil:
				return status.Errorf(codes.Unavailable, "etcd: watching the run's record: %v", wr.Err())
			}
			for _, ev := range wr.Events {
				var rec shardlimitv1.RunRecord
				if ev.Type != clientv3.EventTypePut || protojson.Unmarshal(ev.Kv.Value, &rec) != nil || rec.RequestId != req.Run.RequestId {
					continue
				}
				if last != nil && runstore.Finished(last) {
					break
				}
				if err := follow(&rec); err != nil {
					return err
				}
			}
		}
	}
	if !req.Wait {
		return nil
	}
	if err := a.routesBy(ctx, last.MapVersion); err != nil {
		return err
	}
	return stream.Send(&shardlimitv1.RebalanceRunEvent{Kind: runstore.EventRouted, RoutingVersion: a.r.MapVersion(), UnixNs: time.Now().UnixNano()})
}
