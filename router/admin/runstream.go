package admin

import (
	"context"
	"crypto/rand"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
// request, and followed from before the request is sent, so that no write
// is missed. The leader's answer is the final record; when the leader is
// lost before it answers, the stream keeps following the record, which
// the next leader marks abandoned.
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
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	records := a.followRun(fctx, etcd.Target{Name: "rebalance runs", Key: a.layout.Runs(), Prefix: true},
		func(r *shardlimitv1.RunRecord) bool { return r.RequestId == req.Run.RequestId })
	answered := make(chan runAnswer, 1)
	go func() {
		resp, err := c.Run(ctx, req.Run)
		answered <- runAnswer{resp.GetRun(), err}
	}()
	if err := stream.Send(&shardlimitv1.RebalanceRunEvent{Kind: runstore.EventAsked, Leader: addr, UnixNs: time.Now().UnixNano()}); err != nil {
		return err
	}
	f := &runFollower{stream: stream}
	if err := f.follow(ctx, records, answered); err != nil {
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
	gctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	var resp *clientv3.GetResponse
	var err error
	if req.StartedUnixNs == 0 {
		resp, err = a.etcd.Get(gctx, a.layout.Runs(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	} else {
		resp, err = a.etcd.Get(gctx, a.layout.Run(req.StartedUnixNs))
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
	f := &runFollower{stream: stream}
	if err := f.next(&rec); err != nil || runstore.Finished(&rec) {
		return err
	}
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	records := a.followRun(fctx, etcd.Target{Name: "rebalance run", Key: string(resp.Kvs[0].Key)},
		func(r *shardlimitv1.RunRecord) bool { return r.StartedUnixNs == rec.StartedUnixNs })
	return f.follow(ctx, records, nil)
}

// followRun follows t (etcd.Follow) until ctx ends, and returns the
// channel of the newest record that match selects, not yet read.
func (a *admin) followRun(ctx context.Context, t etcd.Target, match func(*shardlimitv1.RunRecord) bool) <-chan *shardlimitv1.RunRecord {
	r := &runRecords{match: match, newest: make(chan *shardlimitv1.RunRecord, 1)}
	go etcd.Follow(ctx, a.etcd, t, a.log, r)
	return r.newest
}

// runRecords is the etcd.Follower of one run's record: it keeps the newest
// record that match selects until it is read. A newer one replaces one
// not yet read, which loses nothing: runstore.Events gives every event
// between two records of a run.
type runRecords struct {
	match  func(*shardlimitv1.RunRecord) bool
	newest chan *shardlimitv1.RunRecord // capacity 1
}

func (r *runRecords) Reset(kvs []*mvccpb.KeyValue, _ int64) {
	for _, kv := range kvs {
		r.offer(kv.Value)
	}
}

func (r *runRecords) Apply(events []*clientv3.Event, _ int64) {
	for _, ev := range events {
		if ev.Type == clientv3.EventTypePut {
			r.offer(ev.Kv.Value)
		}
	}
}

// offer makes value the newest record, if it is one that match selects.
// Follow calls it from one goroutine, so it never blocks.
func (r *runRecords) offer(value []byte) {
	rec := &shardlimitv1.RunRecord{}
	if protojson.Unmarshal(value, rec) != nil || !r.match(rec) {
		return
	}
	for {
		select {
		case r.newest <- rec:
			return
		default:
			select {
			case <-r.newest:
			default:
			}
		}
	}
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

// follow sends the run's events from the followed records and, when
// answered is not nil, the leader's answer, until the run finished.
func (f *runFollower) follow(ctx context.Context, records <-chan *shardlimitv1.RunRecord, answered chan runAnswer) error {
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
		case rec := <-records:
			if err := f.next(rec); err != nil {
				return err
			}
		}
	}
	return nil
}
