// Package etcd is how every shardlimit component talks to etcd: Dial for
// a client, Layout for every key the cluster stores (the one place that
// builds them), Follow for the one list-then-watch loop that members, rules
// and the shard map are all kept up to date with (Decoded, the Follower
// of a prefix of decoded values, for rules and grants), WatchHealth for the
// etcd-up metric, Backoff for retries, and Revoke for a lease revoke that
// a retry of the client does not turn into an error. Layout.Reads and
// Layout.Writes say which keys each component (Router, Shard, Rebalance)
// reads and writes, and EnableAuth turns etcd's authentication on with a
// role per component that holds exactly those (dev, and `shardlimit etcd
// auth`).
//
// It knows nothing of what the values mean: decoding belongs to the package
// that owns each record (member, rules, shardmap). It must never import a
// component package (shard, router, rebalance).
package etcd
