// Package redial is how every shardlimit component dials another, etcd
// included, so that a cut network costs only the cut: a connection whose
// data goes unacknowledged for UnackedTimeout is closed by the kernel
// (TCP_USER_TIMEOUT), instead of living on through TCP's retransmissions,
// whose gaps grow with the cut (8 s after a 20 s cut, measured); and a dial
// to a peer that answers nothing sends a fresh SYN every SYNInterval
// (Dialer), with attempts and a backoff (ConnectParams) that never leave a
// reachable peer undialed for more than about a second. A peer that is
// alive, even stopped or starved of CPU, acknowledges at the kernel level,
// so only a silent network closes a connection for this.
//
// Package rpc's DialOptions (router → shard, shard → shard, rebalance →
// shard), package etcd's Dial and the Go client (router/client) use it.
// It knows nothing of shardlimit's services.
package redial
