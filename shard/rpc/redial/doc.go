// Package redial is how every shardlimit component dials another, etcd
// included, so that a cut network costs only the cut: a connection whose
// data goes unacknowledged for UnackedTimeout (1 s; etcd's client sets its
// keepalive timeout, 2 s, instead; the Go client 5 s) is closed by the
// kernel (TCP_USER_TIMEOUT), instead of living on through TCP's
// retransmissions, whose gaps grow with the cut (6–8 s after a 20 s cut,
// measured); and a dial to a peer that answers nothing sends a fresh SYN
// every SYNInterval (Dialer), trying each address of a host name in turn,
// with attempts and a backoff (ConnectParams) that never leave a reachable
// peer undialed for more than about a second. A live peer acknowledges at
// the kernel level, even stopped or starved of CPU (see UnackedTimeout for
// the one exception, a full receive window, which gRPC's flow control
// prevents), so on one network only the network closes a connection for
// this.
//
// Package rpc's DialOptions (router → shard, shard → shard, rebalance →
// shard), package etcd's Dial and the Go client (router/client) use it.
// It knows nothing of shardlimit's services.
package redial
