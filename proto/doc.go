// Package proto holds the .proto files of shardlimit's APIs and, under
// shardlimit/v1, the Go code generated from them by `make proto` (buf with
// pinned protoc-gen-go and protoc-gen-go-grpc). It also holds the router's
// HTTP/JSON API: its rules (http.yaml), the grpc-gateway packages
// generated from them under gateway/ (the public API's /v1/check, and
// Envoy's rate limit service as envoy ratelimit's /json, from
// go-control-plane's descriptors that gatewayimage adds to the image), and
// the OpenAPI document under openapi/ (options in openapi.yaml), all by
// `make proto` with pinned protoc-gen-grpc-gateway and
// protoc-gen-openapiv2. Generated files are never edited by hand.
package proto
