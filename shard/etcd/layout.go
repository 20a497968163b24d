package etcd

import (
	"fmt"
	"strings"
)

// Layout is the etcd key prefix of one cluster (default "/shardlimit/"),
// and builds every key stored under it:
//
//	<prefix>members/<id>                 member records, under each shard's lease
//	<prefix>rules/<service>/<name>       one rule each
//	<prefix>grants/<identity-id>         one grant each (role, services, token hashes)
//	<prefix>shardmap                     the shard map in force
//	<prefix>shardmap-history/<version>   the last versions, zero-padded
//	<prefix>rebalance/election           the rebalance job's election
//	<prefix>rebalance/runs/<started>     one record per rebalance run
//	<prefix>handoff/lock                 one hand-off at a time (job run, drain, join)
//	<prefix>unreachable/<shard>/<router> a router's report that it cannot reach a shard, under the router's lease
//	<prefix>evictions/<shard>            a shard evicted for being unreachable, under a lease of the hold's length
//	<prefix>eviction-acks/<shard>        the evicted shard's word that it stopped deciding
type Layout string

// dir returns the prefix with exactly one trailing slash.
func (l Layout) dir() string { return strings.TrimSuffix(string(l), "/") + "/" }

// Members returns the prefix of the member records.
func (l Layout) Members() string { return l.dir() + "members/" }

// Member returns the key of one member record.
func (l Layout) Member(id string) string { return l.Members() + id }

// MemberID returns the id of the member record stored at key.
func (l Layout) MemberID(key string) string { return strings.TrimPrefix(key, l.Members()) }

// Rules returns the prefix of the rules.
func (l Layout) Rules() string { return l.dir() + "rules/" }

// ServiceRules returns the prefix of one service's rules.
func (l Layout) ServiceRules(service string) string { return l.Rules() + service + "/" }

// Rule returns the key of one rule.
func (l Layout) Rule(service, name string) string { return l.ServiceRules(service) + name }

// Grants returns the prefix of the grants.
func (l Layout) Grants() string { return l.dir() + "grants/" }

// Grant returns the key of one identity's grant.
func (l Layout) Grant(id string) string { return l.Grants() + id }

// GrantID returns the identity id of the grant stored at key.
func (l Layout) GrantID(key string) string { return strings.TrimPrefix(key, l.Grants()) }

// ShardMap returns the key of the shard map in force.
func (l Layout) ShardMap() string { return l.dir() + "shardmap" }

// ShardMapHistory returns the prefix of the kept shard map versions.
func (l Layout) ShardMapHistory() string { return l.dir() + "shardmap-history/" }

// ShardMapVersion returns the key of one kept version; keys sort by version.
func (l Layout) ShardMapVersion(version int64) string {
	return fmt.Sprintf("%s%020d", l.ShardMapHistory(), version)
}

// Election returns the prefix of the rebalance job's election.
func (l Layout) Election() string { return l.dir() + "rebalance/election" }

// ElectionCandidates returns the prefix under which the election's
// candidates are stored; the one created first leads.
func (l Layout) ElectionCandidates() string { return l.Election() + "/" }

// Runs returns the prefix of the rebalance run records.
func (l Layout) Runs() string { return l.dir() + "rebalance/runs/" }

// Run returns the key of the record of a run started at startedUnixNs;
// keys sort by start time.
func (l Layout) Run(startedUnixNs int64) string {
	return fmt.Sprintf("%s%020d", l.Runs(), startedUnixNs)
}

// HandoffLock returns the prefix of the lock that lets one hand-off of
// counters run at a time: a rebalance run, a shard's drain or its join.
func (l Layout) HandoffLock() string { return l.dir() + "handoff/lock" }

// Unreachable returns the prefix of the routers' reports of shards they
// cannot reach.
func (l Layout) Unreachable() string { return l.dir() + "unreachable/" }

// UnreachableReport returns the key of one router's report on one shard;
// reporter names the router (its lease).
func (l Layout) UnreachableReport(shard, reporter string) string {
	return l.Unreachable() + shard + "/" + reporter
}

// Evictions returns the prefix of the eviction records.
func (l Layout) Evictions() string { return l.dir() + "evictions/" }

// Eviction returns the key of one shard's eviction record.
func (l Layout) Eviction(shard string) string { return l.Evictions() + shard }

// EvictionAck returns the key of an evicted shard's acknowledgement that
// it saw its lease revoked and stopped deciding.
func (l Layout) EvictionAck(shard string) string { return l.dir() + "eviction-acks/" + shard }

// EvictionAcks returns the prefix of the acknowledgements.
func (l Layout) EvictionAcks() string { return l.dir() + "eviction-acks/" }
