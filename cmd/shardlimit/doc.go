// Command shardlimit is the one binary of shardlimit: `shardlimit shard`,
// `shardlimit router`, `shardlimit dev` (a whole cluster on this machine
// over an embedded etcd) and `shardlimit ctl` (the operator CLI).
//
// Flags map 1:1 onto each component's Options; the command only parses
// them, starts the component and waits for SIGINT or SIGTERM.
package main
