// Package proto holds the .proto files of shardlimit's APIs and, under
// shardlimit/v1, the Go code generated from them by `make proto` (buf with
// pinned protoc-gen-go and protoc-gen-go-grpc). Generated files are never
// edited by hand.
package proto
