// Package vtcodec is gRPC's "proto" codec with the marshal and unmarshal
// code that planetscale/vtprotobuf generates for shardlimit's messages
// (proto/shardlimit/v1/*_vtproto.pb.go) instead of protobuf's reflection,
// for the messages of the request path (the public API's checks and
// answers, the shard API's batches): the router's request path spent a
// third of its CPU encoding and decoding them (BENCHMARKS.md, issue 28).
// Every other message goes to gRPC's own proto codec unchanged.
//
// It registers nothing: a connection or server uses it only when asked,
// so that a program that imports the Go client keeps gRPC's codec for
// every other connection it makes. Package shard/rpc forces it on every
// component's server (Listen) and connection to another component
// (DialOptions); the Go client and the bench force it on their
// connections to routers (CallerDialOption).
//
// It must never change what goes on the wire, nor accept what protobuf
// would refuse: vtprotobuf's code does not check that strings are UTF-8,
// so a message is decoded with it only after a check of its strings, and
// by protobuf (which refuses it, naming the field, see shard/rpc's codec)
// when one is invalid. A caller's connection checks what it sends the
// same way, refusing to send what protobuf would refuse; a component's
// does not check again the strings it received through this check (see
// vtCodec).
package vtcodec
