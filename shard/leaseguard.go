package shard

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
// the shard's own clock) the shard asks every peer it knows (Lease):
//
//   - every peer answers: whoever takes its partitions over is one of
//     them, reaches it, and fences it before it counts; so it goes on
//     deciding, as it did before the guard. This is also etcd down for
//     everyone, which must not stop the limiter. A process that holds no
//     member record while etcd answers it does not count as answering: it
//     runs at the address of a record whose lease runs on (restarted, not
//     registered yet), and the table may give that record this shard's
//     partitions, which a taker then takes over from it, not from this
//     shard (the simulation's overlap mode found it). One that etcd does
//     not answer either counts: etcd down for everyone moves nothing;
//   - a peer does not answer (or there is none): it may be a taker on the
//     other side of a split, which would count from zero beside it. The
//     shard checks its own lease at once (Confirm), and unless etcd
//     confirms it, stops deciding.
//
// Stopped, it decides nothing (routers answer by policy) until its own
// lease is confirmed again, or is lost (then the lost-lease path gives the
// counters back and joins again); peers that answer again do not end it,
// as its partitions may have been taken over while one was silent. What
// it assumes: a peer that answers a Lease call can open a connection to it
// for a pull (the packets of both went the same ways), and a taker is a
// member this shard knows (a shard that joins while this one is cut off
// from etcd must pull from it to join, as long as it is a member).

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
		nextAsk = now.Add(askEvery)
		deadline := reg.ConfirmedUntil().Add(-askEvery / 2)
		if deadline.Before(now.Add(askTimeout)) {
			deadline = now.Add(askTimeout)
		}
		ctx, cancel := context.WithDeadline(s.ctx, deadline)
		confirmed := make(chan bool, 1)
		go func() { confirmed <- reg.Confirm(ctx) }()
		all, detail := s.askPeers(ctx)
		ok := <-confirmed
		cancel()
		switch {
		case ok:
			// etcd answers this shard: the next tick resumes.
		case all && !s.owned.Suspended():
			// Every peer answers: any taker reaches this shard and fences
			// it first. (A shard already stopped waits for its own lease:
			// its partitions may have been taken over while a peer was
			// silent, and a peer that answers again cannot fence them.)
		default:
			if s.owned.Suspend() {
				s.metrics.leaseSuspended.Set(1)
				s.opts.Logger.Warn("membership lease unconfirmed past its time, and a peer does not answer: stopped deciding, as a shard that cannot fence this one may take the partitions over; routers answer by policy until etcd confirms the lease again, or it is lost",
					"confirmed_until", reg.ConfirmedUntil(), "peers", detail)
			}
		}
	}
}

// askEvery is how often the guard asks the peers once the lease is
// unconfirmed, and askTimeout how long an ask past the lease's end may
// take: a peer that stops answering is seen within their sum (750ms),
// before a taker's pull from this shard, which starts after the lease's
// end, gives up on it (--takeover-timeout, 1s). Before the lease's end an
// ask may take until then.
const (
	askEvery   = 250 * time.Millisecond
	askTimeout = 500 * time.Millisecond
)

// askPeers asks every other member this shard knows when etcd last
// answered it, at once, and reports whether every one answered (false
// when there is none), with each one's answer for the log.
func (s *Server) askPeers(ctx context.Context) (all bool, detail map[string]string) {
	s.view.mu.Lock()
	var peers []member.Member
	for _, m := range s.view.members {
		if m.ID != s.opts.ID {
			peers = append(peers, m)
		}
	}
	s.view.mu.Unlock()
	var mu sync.Mutex
	detail = make(map[string]string, len(peers))
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			answer := "silent"
			if c, err := s.peers.Client(p); err == nil {
				resp, err := c.Lease(ctx, &shardlimitv1.LeaseRequest{})
				switch {
				case err == nil && resp.UnregisteredEtcdAnswers:
					answer = unregistered
				case err == nil:
					answer = "etcd never answered it"
					if ms := resp.EtcdAnsweredAgoMs; ms >= 0 {
						answer = "etcd answered it " + (time.Duration(ms) * time.Millisecond).String() + " ago"
					}
				case status.Code(err) == codes.Unimplemented:
					// A peer of an earlier version, in a rolling
					// upgrade: it answered, so it reaches this shard.
					answer = "answered (a version without Lease)"
				}
			}
			mu.Lock()
			detail[p.ID] = answer
			mu.Unlock()
		})
	}
	wg.Wait()
	all = len(peers) > 0
	for _, a := range detail {
		if a == "silent" || a == unregistered {
			all = false
		}
	}
	return all, detail
}

// unregistered is a peer's answer that does not count: a process that
// holds no member record while etcd answers it.
const unregistered = "not registered, and etcd answers it"

// Lease implements the shard API: how long ago etcd last answered this
// shard's keep-alives, and whether it is unregistered while etcd answers
// it.
func (s *Server) Lease(ctx context.Context, _ *shardlimitv1.LeaseRequest) (*shardlimitv1.LeaseResponse, error) {
	resp := &shardlimitv1.LeaseResponse{Id: s.opts.ID, EtcdAnsweredAgoMs: -1}
	reg := s.registration()
	if reg != nil {
		if t := reg.LastAnswered(); !t.IsZero() {
			resp.EtcdAnsweredAgoMs = time.Since(t).Milliseconds()
		}
	}
	if reg == nil || reg.Lost() {
		resp.UnregisteredEtcdAnswers = s.etcdAnswers(ctx)
	}
	return resp, nil
}

// etcdAnswers reports whether etcd answers a read of this shard's member
// key within etcdProbe (well within the asker's askTimeout, so that an
// etcd that does not answer leaves time for this answer).
func (s *Server) etcdAnswers(ctx context.Context) bool {
	if s.etcd == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, etcdProbe)
	defer cancel()
	_, err := s.etcd.Get(ctx, s.layout().Member(s.opts.ID))
	return err == nil
}

// etcdProbe bounds an unregistered shard's read of etcd in Lease.
const etcdProbe = 150 * time.Millisecond
