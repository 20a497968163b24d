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

// runStream is the server side of RebalanceRunStream and WatchRebalanceRun.
type runStream = grpc.ServerStreamingServer[shardlimitv1.RebalanceRunEvent]

// RebalanceRunStream has the leader run, as RebalanceRun does, and follows
// the run's record in etcd, which the leader writes as each phase starts
// and ends. The record is found by the request_id the router gives the
// request, watched from before the request, so that no write is missed.
// The leader's answer is the final record; when the leader is lost before
// it answers, the stream keeps following the record, which the next leader
// marks abandoned.
func (a *admin) RebalanceRunStream(req *shardlimitv1.RebalanceRunRequest, stream runStream) error {
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
	answered := make(chan runAnswer, 1)
	go func() {
		resp, err := c.Run(ctx, req.Run)
		answered <- runAnswer{resp.GetRun(), err}
	}()
	if err := stream.Send(&shardlimitv1.RebalanceRunEvent{Kind: runstore.EventAsked, Leader: addr, UnixNs: time.Now().UnixNano()}); err != nil {
		return err
	}
	f := &runFollower{stream: stream, match: func(r *shardlimitv1.RunRecord) bool { return r.RequestId == req.Run.RequestId }}
	if err := f.follow(ctx, watch, answered); err != nil {
		return err
	}
	if !req.Wait {
		return nil
	}
	if err := a.routesBy(ctx, f.last.MapVersion); err != nil {
		return err
	}
	return stream.Send(&shardlimitv1.RebalanceRunEvent{Kind: runstore.EventRouted, RoutingVersion: a.r.MapVersion(), UnixNs: time.Now().UnixNano()})
}

// WatchRebalanceRun follows a run's record in etcd, from its state now to
// its end, with the events of RebalanceRunStream.
func (a *admin) WatchRebalanceRun(req *shardlimitv1.WatchRebalanceRunRequest, stream runStream) error {
	ctx := stream.Context()
	if req.StartedUnixNs < 0 {
		return status.Errorf(codes.InvalidArgument, "started_unix_ns: %d is negative", req.StartedUnixNs)
	}
	layout := etcd.Layout(a.r.opts.Prefix)
	gctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	var resp *clientv3.GetResponse
	var err error
	if req.StartedUnixNs == 0 {
		resp, err = a.r.etcd.Get(gctx, layout.Runs(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	} else {
		resp, err = a.r.etcd.Get(gctx, layout.Run(req.StartedUnixNs))
	}
	cancel()
	switch {
	case err != nil:
		return status.Errorf(codes.Unavailable, "etcd: %v", err)
	case len(resp.Kvs) == 0 && req.StartedUnixNs == 0:
		return status.Error(codes.NotFound, "no run is recorded")
	case len(resp.Kvs) == 0:
		return status.Errorf(codes.NotFound, "started_unix_ns: no run record started at %d among the last %d (see RebalanceRuns)", req.StartedUnixNs, runstore.Keep)
	}
	var rec shardlimitv1.RunRecord
	if err := protojson.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return status.Errorf(codes.DataLoss, "the run record at %s does not parse: %v", resp.Kvs[0].Key, err)
	}
	f := &runFollower{stream: stream, match: func(r *shardlimitv1.RunRecord) bool { return r.StartedUnixNs == rec.StartedUnixNs }}
	if err := f.next(&rec); err != nil || runstore.Finished(&rec) {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := a.r.etcd.Watch(clientv3.WithRequireLeader(wctx), string(resp.Kvs[0].Key), clientv3.WithRev(resp.Header.Revision+1))
	return f.follow(ctx, watch, nil)
}

// runAnswer is the leader's answer to Run.
type runAnswer struct {
	run *shardlimitv1.RunRecord
	err error
}

// runFollower turns the successive records of one run into events on a
// stream.
type runFollower struct {
	stream runStream
	match  func(*shardlimitv1.RunRecord) bool // selects the run's records
	last   *shardlimitv1.RunRecord
}

// next sends the events from the last record to rec.
func (f *runFollower) next(rec *shardlimitv1.RunRecord) error {
	for _, ev := range runstore.Events(f.last, rec) {
		if err := f.stream.Send(ev); err != nil {
			return err
		}
	}
	f.last = rec
	return nil
}

// follow sends the run's events from the watched records and, when
// answered is not nil, the leader's answer, until the run finished.
func (f *runFollower) follow(ctx context.Context, watch clientv3.WatchChan, answered chan runAnswer) error {
	for f.last == nil || !runstore.Finished(f.last) {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case ans := <-answered:
			answered = nil
			switch {
			case ans.err == nil:
				if err := f.next(ans.run); err != nil {
					return err
				}
			case f.last == nil:
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
				if ev.Type != clientv3.EventTypePut || protojson.Unmarshal(ev.Kv.Value, &rec) != nil || !f.match(&rec) {
					continue
				}
				if f.last != nil && runstore.Finished(f.last) {
					break
				}
				if err := f.next(&rec); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
