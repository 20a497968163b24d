package eviction

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Report is a router's statement that it cannot reach a shard.
type Report struct {
	// Shard is the member id, Addr the address the router dials.
	Shard string `json:"shard"`
	Addr  string `json:"addr"`
	// Router names the reporting router (its address, for people).
	Router string `json:"router"`
	// Since is when the router first saw the shard's circuit open.
	Since time.Time `json:"since"`
	// Reaches is how many other shards the router reaches now.
	Reaches int `json:"reaches"`
}

// Record is an eviction in force.
type Record struct {
	Shard string `json:"shard"`
	Addr  string `json:"addr"`
	// Started is when the evicted shard's process started: the hold keeps
	// that process out, not one started after it (a crashed shard that
	// restarts joins at once; if the routers cannot reach it either, they
	// report it again).
	Started time.Time `json:"started"`
	At      time.Time `json:"at"`
	// Hold is how long the shard is kept from joining again.
	Hold time.Duration `json:"hold"`
	// Routers are the reports' routers.
	Routers []string `json:"routers"`
	// By is the rebalance instance that evicted it.
	By string `json:"by"`
	// LeaseLeft is what the shard's lease had left when it was revoked
	// (rounded up): a shard cut off from etcd too never saw the revoke, and
	// may decide until then, by its own lease guard (shard/leaseguard.go).
	// A taker whose pull from it went unanswered waits that long before it
	// decides from zero, so that a partition never has two deciders.
	LeaseLeft time.Duration `json:"lease_left"`
}

// Until is when the record expires.
func (r Record) Until() time.Time { return r.At.Add(r.Hold) }

func decodeReport(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("unreachable report: %w", err)
	}
	if r.Shard == "" {
		return Report{}, fmt.Errorf("unreachable report: shard: must not be empty")
	}
	if r.Reaches < 0 {
		return Report{}, fmt.Errorf("unreachable report of %s: reaches %d: must not be negative", r.Shard, r.Reaches)
	}
	return r, nil
}

func decodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("eviction record: %w", err)
	}
	if r.Shard == "" {
		return Record{}, fmt.Errorf("eviction record: shard: must not be empty")
	}
	return r, nil
}

// Seen is a report as read from etcd, with the revision it was written at.
type Seen struct {
	Report
	Rev int64
}

// Registered is a member as read from etcd: whether it serves, the
// revision its record was created at (its registration), and its lease.
type Registered struct {
	ID      string
	Addr    string
	Started time.Time
	Serving bool
	Created int64
	Lease   int64
}

// Verdict is Decide's answer: the member to evict (ok false: none), and
// the reports that judged it.
type Verdict struct {
	Member  Registered
	Reports []Seen
	ok      bool
}

// Evict reports whether the verdict evicts a member.
func (v Verdict) Evict() bool { return v.ok }

// Decide picks the member to evict, if any: a serving member reported
// unreachable by a router that reaches another shard, after the member
// registered, while another serving member stays and no eviction is in
// force (evicting names the shards whose eviction records exist). Of
// several, the one with the most reports goes first, then the lowest id.
// It is a pure function of what was read, so every leader decides alike.
func Decide(reports []Seen, members []Registered, evicting []string) Verdict {
	if len(evicting) > 0 {
		return Verdict{}
	}
	serving := 0
	for _, m := range members {
		if m.Serving {
			serving++
		}
	}
	if serving < 2 {
		return Verdict{}
	}
	var best Verdict
	for _, m := range members {
		if !m.Serving {
			continue
		}
		var valid []Seen
		for _, r := range reports {
			if r.Shard == m.ID && r.Rev > m.Created && r.Reaches > 0 {
				valid = append(valid, r)
			}
		}
		if len(valid) == 0 {
			continue
		}
		if !best.ok || len(valid) > len(best.Reports) || (len(valid) == len(best.Reports) && m.ID < best.Member.ID) {
			best = Verdict{Member: m, Reports: valid, ok: true}
		}
	}
	if best.ok {
		slices.SortFunc(best.Reports, func(a, b Seen) int { return cmp.Compare(a.Rev, b.Rev) })
	}
	return best
}
