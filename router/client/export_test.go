package client

// EtcdEndpoint returns the package's embedded etcd, for the examples of
// package client_test.
func EtcdEndpoint() string { return etcdEndpoint }
