// Package codec makes gRPC's "proto" codec use the marshal and unmarshal
// code that planetscale/vtprotobuf generates for shardlimit's messages
// (proto/shardlimit/v1/*_vtproto.pb.go) instead of protobuf's reflection:
// the router's request path spends a third of its CPU encoding and
// decoding messages under load (BENCHMARKS.md, issue 28). Importing it
// registers the codec, process-wide, in its init; the router, the Go
// client and the bench import it, and so does every process of the
// shardlimit binary. Messages without generated code (Envoy's, gRPC's
// health and reflection) go to gRPC's own proto codec unchanged.
//
// It must never change what goes on the wire, nor accept what protobuf
// would refuse: vtprotobuf's decoder does not check that strings are
// UTF-8, so the messages whose strings come from callers are decoded with
// it only through a check of those strings, and decoded again by protobuf
// (which names the field, see shard/rpc's codec) when one is invalid.
package codec
