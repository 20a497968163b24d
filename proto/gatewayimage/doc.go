// Command gatewayimage adds the descriptors of Envoy's rate limit service
// v3 (envoy/service/ratelimit/v3/rls.proto and every file it imports, as
// compiled into go-control-plane) to a buf image of shardlimit's own
// .proto files, so that `make proto` generates the HTTP gateways of both
// APIs and one OpenAPI document from it (buf.gen.http.yaml). Envoy's
// .proto sources are not vendored: go-control-plane, pinned in go.mod, is
// the one copy of the API the router serves over gRPC, so the /json
// gateway is generated from the very same descriptors.
//
// Usage: go run ./proto/gatewayimage IN OUT, where IN is `buf build -o`'s
// image and OUT the merged image (both binary FileDescriptorSets).
package main
