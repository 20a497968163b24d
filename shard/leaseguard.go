package shard

import (
	"context"
	"sync"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
)

// The lease guard. A shard decides its partitions because its lease says
// it owns them; etcd expires the lease a TTL after the last keep-alive it
// applied, and then the routers move the partitions and the new owners
// take them over, with a fence that stops this shard first, when they
// reach it. A shard cut off from etcd and from its peers, but still
// reached by a router that is cut off from etcd too (a minority side of a
// split), is past every fence: without a guard it would go on deciding
// partitions that the majority side counts afresh, two deciders for one
// partition (the robustness suite's seed 8 found it). So past
// ConfirmedUntil (the last answered keep-alive's sending plus the TTL, by
// the shard's own clock) the shard asks its peers when etcd last answered
// them (Lease):
//
//   - every peer answers, and none has heard from etcd since this shard's
//     keep-alives began to fail (FailingSince): etcd is down for everyone,
//     nobody can take anything over, and the shard goes on deciding with
//     what it knows, as an outage of etcd must not stop the limiter;
//   - a peer heard from etcd since: etcd answers (it came back, or this
//     shard alone is cut off from it). The shard checks its own lease at
//     once (Confirm), and stops deciding unless etcd confirms it;
//   - a peer does not answer: it may be a taker on the other side of a
//     split, so the shard stops deciding.
//
// Stopped, it decides nothing (routers answer by policy) until its own
// lease is confirmed again, or is lost (then the lost-lease path gives the
// counters back and joins again). What it assumes: a peer whose etcd
// answers again confirms its own lease within a few seconds, well within
// the TTL that etcd restores every lease with when it comes back.

// leaseMargin is how long before ConfirmedUntil the guard acts: room for
// the peers' answers and the clocks' rates.
func (s *Server) leaseMargin() time.Duration { return max(s.opts.LeaseTTL/10, 200*time.Millisecond) }

// guardLease runs the guard until the server stops.
func (s *Server) guardLease() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var nextAsk time.Time
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		reg := s.registration()
		if reg == nil || reg.Lost() {
			continue // the lost-lease path fences everything itself
		}
		now := time.Now()
		if now.Before(reg.ConfirmedUntil().Add(-s.leaseMargin())) {
			if s.owned.Resume() {
				s.metrics.leaseSuspended.Set(0)
				s.opts.Logger.Info("membership lease confirmed again: deciding again")
			}
			continue
		}
		if now.Before(nextAsk) {
			continue
		}
		nextAsk = now.Add(500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(s.ctx, time.Second)
		verdict, detail := s.askPeers(ctx, reg.FailingSince())
		if verdict == etcdAnswersPeers && reg.Confirm(ctx) {
			cancel()
			continue // etcd answers this shard too: the next tick resumes
		}
		cancel()
		if verdict == etcdDownForAll {
			if s.owned.Resume() {
				s.metrics.leaseSuspended.Set(0)
				s.opts.Logger.Warn("membership lease unconfirmed, and every peer's too: etcd is down for everyone; deciding on with what this shard knows")
			}
			continue
		}
		if s.owned.Suspend() {
			s.metrics.leaseSuspended.Set(1)
			s.opts.Logger.Warn("membership lease unconfirmed past its time, and etcd is not down for everyone: stopped deciding, as another shard may have taken the partitions over; routers answer by policy until the lease is confirmed again or lost",
				"confirmed_until", reg.ConfirmedUntil(), "peers", detail)
		}
	}
}

// peersVerdict is what the peers say of etcd.
type peersVerdict int

const (
	etcdDownForAll   peersVerdict = iota // every peer answered; none heard from etcd since
	etcdAnswersPeers                     // some peer heard from etcd since
	peerSilent                           // some peer did not answer (or there is none)
)

// askPeers asks every other member known when etcd last answered it, at
// once, and judges by since: when this shard's keep-alives began to fail
// (zero: they have not yet, and any answer counts as recent).
func (s *Server) askPeers(ctx context.Context, since time.Time) (peersVerdict, map[string]string) {
	s.view.mu.Lock()
	var peers []member.Member
	for _, m := range s.view.members {
		if m.ID != s.opts.ID {
			peers = append(peers, m)
		}
	}
	s.view.mu.Unlock()
	if len(peers) == 0 {
		return peerSilent, nil
	}
	var mu sync.Mutex
	detail := make(map[string]string, len(peers))
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			answer := "silent"
			if c, err := s.peers.Client(p); err == nil {
				if resp, err := c.Lease(ctx, &shardlimitv1.LeaseRequest{}); err == nil {
					// When etcd answered it, by this shard's clock: later
					// than it was by the answer's transit, which errs
					// toward "recent", and so toward stopping.
					ago := time.Duration(resp.EtcdAnsweredAgoMs) * time.Millisecond
					answer = "not since"
					if resp.EtcdAnsweredAgoMs >= 0 && (since.IsZero() || time.Now().Add(-ago).After(since)) {
						answer = "since"
					}
				}
			}
			mu.Lock()
			detail[p.ID] = answer
			mu.Unlock()
		})
	}
	wg.Wait()
	verdict := etcdDownForAll
	for _, a := range detail {
		switch {
		case a == "since":
			return etcdAnswersPeers, detail
		case a == "silent":
			verdict = peerSilent
		}
	}
	return verdict, detail
}

// Lease implements the shard API: how long ago etcd last answered this
// shard's keep-alives.
func (s *Server) Lease(context.Context, *shardlimitv1.LeaseRequest) (*shardlimitv1.LeaseResponse, error) {
	ago := int64(-1)
	if reg := s.registration(); reg != nil {
		if t := reg.LastAnswered(); !t.IsZero() {
			ago = time.Since(t).Milliseconds()
		}
	}
	return &shardlimitv1.LeaseResponse{Id: s.opts.ID, EtcdAnsweredAgoMs: ago}, nil
}
