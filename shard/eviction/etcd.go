package eviction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/member"
)

// Reporter keeps one router's reports in etcd, under a lease of its own
// (a session): the reports go with the router.
type Reporter struct {
	cli     *clientv3.Client
	layout  etcd.Layout
	ttl     time.Duration
	log     *slog.Logger
	session *concurrency.Session
	written map[string]sent // by shard id, as written under session
}

// sent is a report as last written, and when.
type sent struct {
	Report
	at time.Time
}

// NewReporter returns a reporter for a router; ttl is its lease's.
func NewReporter(cli *clientv3.Client, layout etcd.Layout, ttl time.Duration, log *slog.Logger) *Reporter {
	return &Reporter{cli: cli, layout: layout, ttl: ttl, log: log, written: map[string]sent{}}
}

// Set makes the router's reports in etcd exactly want (by shard id):
// writes the new ones, deletes those no longer wanted. A report of the
// same shard at the same address is written again once per lease TTL,
// and no more often: the rebalance leader counts a report only when it
// was written after the shard's registration, and a shard that left and
// registered again at the same address, while this router still could
// not reach it, may not have looked gone to it meanwhile (its member
// watch may deliver the delete and the put at once). It opens a session
// when it first has one to write, and a new one when the last was lost
// (whose reports went with it); the lease is granted within ctx, so that
// a router cut off from etcd is not held here.
func (r *Reporter) Set(ctx context.Context, want map[string]Report) error {
	if r.session != nil {
		select {
		case <-r.session.Done():
			r.log.Warn("the lease of this router's unreachable-shard reports was lost; writing them again")
			r.session, r.written = nil, map[string]sent{}
		default:
		}
	}
	if r.session == nil {
		if len(want) == 0 {
			return nil
		}
		lease, err := r.cli.Grant(ctx, int64(max(1, int(r.ttl/time.Second))))
		if err != nil {
			return fmt.Errorf("open the reports' lease: %w", err)
		}
		// Kept alive for the router's life, not ctx's.
		s, err := concurrency.NewSession(r.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(context.Background()))
		if err != nil {
			return fmt.Errorf("open the reports' lease: %w", err)
		}
		r.session = s
	}
	reporter := fmt.Sprintf("%x", int64(r.session.Lease()))
	var errs []error
	for id := range r.written {
		if _, ok := want[id]; ok {
			continue
		}
		if _, err := r.cli.Delete(ctx, r.layout.UnreachableReport(id, reporter)); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.written, id)
		r.log.Info("shard reachable again: report withdrawn", "shard", id)
	}
	for id, rep := range want {
		old, ok := r.written[id]
		if ok && old.Addr == rep.Addr && time.Since(old.at) < r.ttl {
			continue
		}
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := r.cli.Put(ctx, r.layout.UnreachableReport(id, reporter), string(b), clientv3.WithLease(r.session.Lease())); err != nil {
			errs = append(errs, err)
			continue
		}
		r.written[id] = sent{rep, time.Now()}
		if !ok || old.Addr != rep.Addr {
			r.log.Warn("reported a shard this router cannot reach", "shard", id, "addr", rep.Addr, "since", rep.Since, "other_shards_reached", rep.Reaches)
		}
	}
	return errors.Join(errs...)
}

// Reported returns how many shards the reporter's reports name now.
func (r *Reporter) Reported() int { return len(r.written) }

// Close ends the session, and with it the reports.
func (r *Reporter) Close() {
	if r.session != nil {
		_ = r.session.Close()
	}
}

// State is what the leader reads to Decide.
type State struct {
	Reports []Seen
	Members []Registered
	// Evicted are the shards whose eviction records are in force, each
	// with its record's creation revision.
	Evicted map[string]int64
}

// Evicting returns the shards whose eviction records are in force.
func (s State) Evicting() []string { return slices.Collect(maps.Keys(s.Evicted)) }

// Read reads the reports, the members and the evictions in one
// transaction, so they are of one revision. Malformed records are left
// out (and returned as errors beside the state).
func Read(ctx context.Context, cli *clientv3.Client, layout etcd.Layout) (State, []error, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(layout.Unreachable(), clientv3.WithPrefix()),
		clientv3.OpGet(layout.Members(), clientv3.WithPrefix()),
		clientv3.OpGet(layout.Evictions(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return State{}, nil, err
	}
	st := State{Evicted: map[string]int64{}}
	var bad []error
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		rep, err := decodeReport(kv.Value)
		if err == nil && !strings.HasPrefix(string(kv.Key), layout.Unreachable()+rep.Shard+"/") {
			err = fmt.Errorf("unreachable report of shard %q stored under %s", rep.Shard, kv.Key)
		}
		if err != nil {
			bad = append(bad, err)
			continue
		}
		st.Reports = append(st.Reports, Seen{Report: rep, Rev: kv.ModRevision})
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		id := layout.MemberID(string(kv.Key))
		m, err := member.Decode(id, kv.Value)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		st.Members = append(st.Members, Registered{ID: id, Addr: m.Addr, Started: m.Started, Serving: m.Serving(), Created: kv.CreateRevision, Lease: kv.Lease})
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		rec, err := decodeRecord(kv.Value)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		st.Evicted[rec.Shard] = kv.CreateRevision
	}
	return st, bad, nil
}

// ErrChanged means the member judged registered again (or left), or a
// fence failed, before the eviction was written: nothing was done.
var ErrChanged = errors.New("the member's registration changed since it was judged")

// Evict writes the eviction record of v's member under a new lease of
// hold, only if the member's record is still the registration judged and
// every fence holds (the leader's election key), then revokes the
// member's lease. A revoke that fails is retried on the leader's next
// look (State.Stale).
func Evict(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, v Verdict, hold time.Duration, by string, now time.Time, fence ...clientv3.Cmp) (Record, error) {
	left, err := cli.TimeToLive(ctx, clientv3.LeaseID(v.Member.Lease))
	if err != nil {
		return Record{}, fmt.Errorf("read the lease of %s: %w", v.Member.ID, err)
	}
	// TimeToLive rounds down to the second: one more is the most it had.
	rec := Record{Shard: v.Member.ID, Addr: v.Member.Addr, Started: v.Member.Started, At: now, Hold: hold, By: by,
		LeaseLeft: time.Duration(max(left.TTL, 0)+1) * time.Second}
	for _, r := range v.Reports {
		rec.Routers = append(rec.Routers, r.Router)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Record{}, err
	}
	lease, err := cli.Grant(ctx, max(1, int64(hold/time.Second)))
	if err != nil {
		return Record{}, fmt.Errorf("grant the eviction's lease: %w", err)
	}
	key := layout.Member(v.Member.ID)
	resp, err := cli.Txn(ctx).
		If(append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", v.Member.Created)}, fence...)...).
		Then(clientv3.OpPut(layout.Eviction(v.Member.ID), string(b), clientv3.WithLease(lease.ID))).
		Commit()
	if err == nil && !resp.Succeeded {
		err = ErrChanged
	}
	if err != nil {
		_, _ = cli.Revoke(ctx, lease.ID)
		return Record{}, err
	}
	return rec, Revoke(ctx, cli, v.Member)
}

// Revoke revokes a member's lease: to everyone, its record is gone.
func Revoke(ctx context.Context, cli *clientv3.Client, m Registered) error {
	if err := etcd.Revoke(ctx, cli, clientv3.LeaseID(m.Lease)); err != nil {
		return fmt.Errorf("revoke the lease of %s: %w", m.ID, err)
	}
	return nil
}

// Stale returns the members that registered before their own eviction
// record was written (the revoke that should have followed failed, or
// has not been seen): their leases are to be revoked.
func (s State) Stale() []Registered {
	var out []Registered
	for _, m := range s.Members {
		if rev, ok := s.Evicted[m.ID]; ok && m.Created < rev {
			out = append(out, m)
		}
	}
	return out
}

// Ack records, for a shard whose process started at started and whose
// lease was just lost, that it stopped deciding, if an eviction of that
// process is in force: takers whose pulls from it go unanswered then
// decide its partitions at once instead of waiting out its lease
// (OutwaitEvicted). It reports whether it wrote one.
func Ack(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, id string, started time.Time) (bool, error) {
	resp, err := cli.Get(ctx, layout.Eviction(id))
	if err != nil || len(resp.Kvs) == 0 {
		return false, err
	}
	rec, err := decodeRecord(resp.Kvs[0].Value)
	if err != nil || !rec.Started.Equal(started) {
		return false, err
	}
	b, err := json.Marshal(ack{Shard: id, At: rec.At})
	if err != nil {
		return false, err
	}
	_, err = cli.Put(ctx, layout.EvictionAck(id), string(b))
	return err == nil, err
}

// ack is an evicted shard's word that it stopped deciding: At is its
// eviction record's.
type ack struct {
	Shard string    `json:"shard"`
	At    time.Time `json:"at"`
}

// OutwaitEvicted returns once owner (its id, address and, unless zero,
// its process's start), whose pull a taker began at start went
// unanswered, cannot be deciding any more: at once when it was not
// evicted (an expired lease: its own lease guard stopped it before the
// expiry; or the eviction is another process's, at another address or
// started at another time: a process restarted since at the address,
// whose predecessor's acknowledgement says nothing of it) or has
// acknowledged its eviction (Ack); else once
// what its lease had left at the eviction (Record.LeaseLeft), and margin,
// have passed since start (the takeover began after the revoke), for an
// owner cut off from etcd too never saw the revoke and decides until its
// lease guard stops it. It reports how long it waited, and why.
func OutwaitEvicted(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, owner Registered, start time.Time, margin time.Duration) (time.Duration, string) {
	id := owner.ID
	began := time.Now()
	var deadline time.Time
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cli.Txn(rctx).Then(clientv3.OpGet(layout.Eviction(id)), clientv3.OpGet(layout.EvictionAck(id))).Commit()
		cancel()
		if err == nil {
			recs, acks := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
			if len(recs) == 0 {
				return time.Since(began), "not evicted"
			}
			rec, err := decodeRecord(recs[0].Value)
			if err != nil || rec.Addr != owner.Addr || !owner.Started.IsZero() && !rec.Started.Equal(owner.Started) {
				return time.Since(began), "not evicted"
			}
			var a ack
			if len(acks) > 0 && json.Unmarshal(acks[0].Value, &a) == nil && a.At.Equal(rec.At) {
				return time.Since(began), "acknowledged"
			}
			deadline = start.Add(rec.LeaseLeft + margin)
		}
		if deadline.IsZero() {
			deadline = start.Add(margin + 10*time.Second) // etcd unread: a lease's worth
		}
		if !time.Now().Before(deadline) {
			return time.Since(began), "its lease ran out"
		}
		select {
		case <-ctx.Done():
			return time.Since(began), "stopping"
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitCleared returns once shard id, whose process started at started,
// has no eviction record that holds it (one of another process does
// not), or ctx ends, or etcd cannot be read (an error: the caller
// retries). held is called with the record each time one is found in the
// way.
func WaitCleared(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, id string, started time.Time, held func(Record)) error {
	key := layout.Eviction(id)
	for {
		gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := cli.Get(gctx, key)
		cancel()
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		rec, err := decodeRecord(resp.Kvs[0].Value)
		if err != nil {
			rec = Record{Shard: id, Started: started} // malformed: held, to be safe, until it goes
		}
		if !rec.Started.Equal(started) {
			return nil // another process's eviction: this one starts afresh
		}
		held(rec)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		gone := false
		for wr := range cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					gone = true
				}
			}
			if gone {
				break
			}
		}
		wcancel()
		if gone {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
