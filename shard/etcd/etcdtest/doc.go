// Package etcdtest starts an embedded etcd for a test and gives it a
// client: the setup the tests of packages that talk to etcd share. Only
// tests import it, so that `testing` stays out of the binary (package
// embedded, which `shardlimit dev` and `shardlimit etcd` run, cannot hold
// it).
package etcdtest
