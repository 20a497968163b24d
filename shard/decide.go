package shard

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// batch is the scratch space of one Decide call, reused through batchPool
// so that a call allocates only its response.
type batch struct {
	rules    []limiter.Rule
	checks   []BatchCheck
	out      []limiter.Decision
	forwards []forwardTo
}

var batchPool = sync.Pool{New: func() any { return new(batch) }}

// maxPooledChecks bounds the batches kept for reuse: the scratch space of
// a rare huge batch is left to the garbage collector.
const maxPooledChecks = 4096

// Decide implements the shard API: it validates the whole batch first (a
// bad check changes nothing), reads the clock once, and decides every
// check through Store.DecideBatch.
func (s *Server) Decide(ctx context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	var out answers
	if err := s.decide(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out.resp, nil
}

// answers is a DecideResponse with the decisions it points to, kept for
// reuse across the batches of one stream.
type answers struct {
	resp shardlimitv1.DecideResponse
	buf  []shardlimitv1.ShardDecision
}

// DecideStream implements the shard API: batches are decided as Decide
// decides them, one at a time in the order received, and each answer
// reuses the previous one's space once it is sent. The stream ends when the
// router closes it, or when the shard stops (after it deregistered).
func (s *Server) DecideStream(st grpc.BidiStreamingServer[shardlimitv1.DecideStreamRequest, shardlimitv1.DecideStreamResponse]) error {
	// Recv cannot be interrupted: it runs on a goroutine of its own, so
	// that the stream can end when the shard stops. It ends with the
	// stream, once this handler returned.
	reqs := make(chan *shardlimitv1.DecideStreamRequest, 4)
	var recvErr error
	go func() {
		defer close(reqs)
		for {
			req, err := st.Recv()
			if err != nil {
				recvErr = err
				return
			}
			select {
			case reqs <- req:
			case <-st.Context().Done():
				return
			}
		}
	}()
	var out answers
	var resp shardlimitv1.DecideStreamResponse
	for {
		var req *shardlimitv1.DecideStreamRequest
		select {
		case req = <-reqs:
		case <-s.streamsEnd:
			return status.Error(codes.Unavailable, "shard stopping")
		}
		if req == nil {
			if recvErr == io.EOF {
				return nil
			}
			return recvErr
		}
		resp.Batch, resp.Response, resp.Error = req.Batch, nil, ""
		if err := s.decide(st.Context(), req.GetRequest(), &out); err != nil {
			resp.Error = status.Convert(err).Message()
		} else {
			resp.Response = &out.resp
		}
		if err := st.Send(&resp); err != nil {
			return err
		}
	}
}

// decide validates req and decides it into out, reusing out's space. A
// batch that carries a router's trace context gets a span in that trace
// (ctx is the call's or the stream's).
func (s *Server) decide(ctx context.Context, req *shardlimitv1.DecideRequest, out *answers) (err error) {
	if s.tracer != nil && len(req.GetTraceContext()) > 0 {
		span := s.startBatch(ctx, req)
		defer func() { tracing.End(span, err) }()
	}
	b := batchPool.Get().(*batch)
	defer func() {
		if cap(b.checks) <= maxPooledChecks {
			clear(b.checks) // drop the strings of this batch
			batchPool.Put(b)
		}
	}()
	refunds, err := s.batchOf(req, b)
	if err != nil {
		return err
	}
	if req.Forwarded {
		// The previous owner fenced these partitions for a hand-off to
		// here: decide once the final copy has been merged.
		s.waitReceived(ctx, b.checks)
	}
	now := time.Now().UnixNano()
	// Until End, no partition stops being decided here: a fence waits
	// for this batch (package ownership), and so finds its changes in the
	// journal.
	s.owned.Begin()
	skipped := s.skipNotDecided(b.checks, !req.Forwarded, &b.forwards)
	// A refund is no decision, nor is a check not decided here: they count
	// toward neither the rate that drives elastic limits nor the decisions
	// served.
	s.rate.Add(uint64(len(req.Checks) - refunds - skipped))
	s.decisions.Add(uint64(len(req.Checks) - refunds - skipped))
	s.store.DecideBatch(b.checks, now, s.utilization(), b.out)
	s.journal.record(b.checks)
	s.owned.End()

	n := len(b.out)
	if cap(out.buf) < n {
		out.buf = make([]shardlimitv1.ShardDecision, n)
		out.resp.Decisions = make([]*shardlimitv1.ShardDecision, 0, n)
	}
	out.buf = out.buf[:n]
	out.resp.Decisions = out.resp.Decisions[:n]
	var counts [limiter.GCRA + 1][results]float64
	for i := range b.out {
		d, o := &b.out[i], &out.buf[i]
		o.Allowed, o.Limit, o.Remaining, o.ResetAfterNs, o.RetryAfterNs = d.Allowed, d.Limit, d.Remaining, d.ResetAfter, d.RetryAfter
		o.DelayNs, o.SoftAllowanceUsed, o.Shadow, o.ShadowDenied = d.Delay, d.SoftAllowanceUsed, d.Shadow, d.ShadowDenied
		o.NextAfterNs = d.NextAfter
		o.NotDecided = b.checks[i].Skip
		out.resp.Decisions[i] = o
		if c := &b.checks[i]; !c.Refund && !c.Skip {
			r := resultAllowed
			switch {
			case d.ShadowDenied:
				r = resultShadowDenied
			case !d.Allowed:
				r = resultDenied
			}
			counts[c.Limiter.Algorithm][r]++
		}
	}
	for a := range counts {
		for r, n := range counts[a] {
			if n > 0 {
				s.metrics.decisions[a][r].Add(n)
			}
		}
	}
	if len(b.forwards) > 0 {
		s.forward(ctx, req, b.forwards, out)
	}
	s.metrics.duration.Observe(float64(time.Now().UnixNano()-now) / 1e9)
	return nil
}

// skipNotDecided marks the checks whose partition is not decided here
// (ownership.Set.Decides) to be skipped, counts them, and returns how many
// of them are not refunds. With forward, those whose partition a planned
// hand-off fenced here are added to forwards, by next owner, to be
// forwarded there. Only between Begin and End.
func (s *Server) skipNotDecided(checks []BatchCheck, forward bool, forwards *[]forwardTo) (decisions int) {
	*forwards = (*forwards)[:0]
	if s.owned == nil {
		return 0
	}
	notDecided := 0
	for i := range checks {
		c := &checks[i]
		if s.owned.Decides(uint32(c.Partition)) {
			continue
		}
		c.Skip = true
		if !c.Refund {
			decisions++
		}
		if to, ok := s.owned.ForwardTo(uint32(c.Partition)); ok && forward {
			addForward(forwards, to, i)
		} else if !c.Refund {
			notDecided++
		}
	}
	if notDecided > 0 {
		s.metrics.notDecided.Add(float64(notDecided))
	}
	return decisions
}

// batchOf validates req and fills b with its rules and checks; it returns
// the number of refunds. A check's partition must be its hash modulo the
// shard's partition count: the store files the key's state under the hash
// and a hand-off moves it by the partition the hash gives, so a check whose
// two disagree would count its load in one partition and its state in
// another.
func (s *Server) batchOf(req *shardlimitv1.DecideRequest, b *batch) (refunds int, err error) {
	b.rules = b.rules[:0]
	for i, p := range req.Rules {
		b.rules = append(b.rules, limiter.Rule{
			Algorithm: limiter.Algorithm(p.Algorithm), Limit: p.Limit, Period: p.PeriodNs, Burst: p.Burst,
			MaxDelay: p.MaxDelayNs, SoftPercent: p.SoftPercent, ElasticPercent: p.ElasticPercent,
			ElasticLoadPercent: p.ElasticLoadPercent, Shadow: p.Shadow,
		})
		if err := b.rules[i].Validate(); err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "rules[%d].%v", i, err)
		}
	}
	partitions := uint64(s.opts.Partitions)
	b.checks = b.checks[:0]
	for i, c := range req.Checks {
		switch {
		case int(c.Rule) >= len(b.rules):
			return 0, status.Errorf(codes.InvalidArgument, "checks[%d].rule: index %d out of range 0..%d", i, c.Rule, len(b.rules)-1)
		case c.Hits < 0:
			return 0, status.Errorf(codes.InvalidArgument, "checks[%d].hits: %d is negative", i, c.Hits)
		case c.Refund && c.Hits < 1:
			return 0, status.Errorf(codes.InvalidArgument, "checks[%d].hits: a refund gives back at least 1 hit, not %d", i, c.Hits)
		case c.Hash != 0 && c.Hash%partitions != uint64(c.Partition):
			return 0, status.Errorf(codes.InvalidArgument, "checks[%d].partition: %d, but its hash falls in partition %d of %d",
				i, c.Partition, c.Hash%partitions, partitions)
		}
		if c.Refund {
			refunds++
		}
		b.checks = append(b.checks, BatchCheck{
			Check: Check{
				Service: c.Service, Endpoint: c.Endpoint, User: c.User, Rule: req.Rules[c.Rule].Name,
				Hits: c.Hits, Partition: int(c.Partition),
			},
			Limiter: &b.rules[c.Rule], Refund: c.Refund,
		})
	}
	if cap(b.out) < len(b.checks) {
		b.out = make([]limiter.Decision, len(b.checks))
	}
	b.out = b.out[:len(b.checks)]
	return refunds, nil
}
