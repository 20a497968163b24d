// Package embedded runs a single-member etcd server inside the process:
// the etcd of `shardlimit dev`, and the one etcd that each test package
// starts in its TestMain (RunTests), under which every test works with a
// key prefix of its own.
//
// It is for development and tests; production runs a real etcd cluster.
// Plain text by default (tests); ClientCertAuth serves TLS only and
// requires a client certificate (dev).
// Only `dev` and tests import it, so no component links the etcd server.
package embedded
