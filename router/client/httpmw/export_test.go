package httpmw

// EtcdEndpoint returns the package's embedded etcd, for the examples of
// package httpmw_test.
func EtcdEndpoint() string { return etcdEndpoint }
