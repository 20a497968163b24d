package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
)

// Forwarding. A planned hand-off's final copy fences the moving
// partitions here before the routers switch (package handoff): from then
// on this shard forwards their checks to their next owner, which decides
// them once that copy has been merged, and answers with its decisions. So
// a router that has not switched yet is answered exactly, and a user
// consuming through the switch is counted in one place only.

// forwardTo is the checks of one batch forwarded to one next owner: their
// indexes in the batch.
type forwardTo struct {
	to  member.Member
	idx []int
}

// addForward adds check i to the checks forwarded to to.
func addForward(fs *[]forwardTo, to member.Member, i int) {
	for j := range *fs {
		if f := &(*fs)[j]; f.to.ID == to.ID {
			f.idx = append(f.idx, i)
			return
		}
	}
	*fs = append(*fs, forwardTo{to: to, idx: []int{i}})
}

// forwardTimeout bounds one forward, and a forwarded batch's wait at the
// next owner (a router's stream carries no deadline per batch): the next
// owner answers as soon as the final copy has been merged, which takes
// milliseconds.
const forwardTimeout = 2 * time.Second

// Results of a forwarded check, the values of the result label.
var forwardResults = []string{"decided", "not_decided", "error"}

// forward sends each next owner its checks of req, marked forwarded, and
// puts its decisions into out in their place. A forward that fails leaves
// its checks not decided: routers answer them by policy.
func (s *Server) forward(ctx context.Context, req *shardlimitv1.DecideRequest, fs []forwardTo, out *answers) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(func() {
			fwd := &shardlimitv1.DecideRequest{Rules: req.Rules, TraceContext: req.TraceContext, Forwarded: true,
				Checks: make([]*shardlimitv1.ShardCheck, len(f.idx))}
			for j, i := range f.idx {
				fwd.Checks[j] = req.Checks[i]
			}
			resp, err := s.decideAt(ctx, f.to, fwd)
			if err != nil {
				s.metrics.forwarded.WithLabelValues("error").Add(float64(len(f.idx)))
				s.opts.Logger.Debug("hand-off: forwarding checks to the next owner failed; routers answer them by policy",
					"to", f.to.ID, "addr", f.to.Addr, "checks", len(f.idx), "err", err)
				return
			}
			decided := 0
			for j, i := range f.idx {
				o := &out.buf[i]
				proto.Reset(o)
				proto.Merge(o, resp.Decisions[j])
				if !o.NotDecided {
					decided++
				}
			}
			s.metrics.forwarded.WithLabelValues("decided").Add(float64(decided))
			s.metrics.forwarded.WithLabelValues("not_decided").Add(float64(len(f.idx) - decided))
		})
	}
	wg.Wait()
}

// decideAt has shard to decide req, and checks that it answered every
// check.
func (s *Server) decideAt(ctx context.Context, to member.Member, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	c, err := s.peers.Client(to)
	if err != nil {
		return nil, err
	}
	resp, err := c.Decide(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(resp.Decisions) != len(req.Checks) {
		return nil, fmt.Errorf("%d decisions for %d checks", len(resp.Decisions), len(req.Checks))
	}
	return resp, nil
}
