package envoy

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// The keys of the dynamic metadata that mark an answer made by failure
// policy. Envoy's rate limit filter emits a response's dynamic_metadata
// under its own filter name, so an access log reads them as
// %DYNAMIC_METADATA(envoy.filters.http.ratelimit:shardlimit:failure_policy)%:
//
//	{"shardlimit": {"failure_policy": true, "reason": "shard_unreachable", "descriptors": [0, 2]}}
const (
	// MetadataNamespace is the one top-level key, a Struct of the others.
	MetadataNamespace = "shardlimit"
	// MetadataFailurePolicy is true: some descriptor was answered by its
	// rule's failure policy, not by a counter.
	MetadataFailurePolicy = "failure_policy"
	// MetadataReason says why: ReasonShardUnreachable or ReasonOverload.
	MetadataReason = "reason"
	// MetadataDescriptors lists the indexes (from 0, in the request's
	// order) of the descriptors answered by failure policy.
	MetadataDescriptors = "descriptors"
)

// Reasons of an answer by failure policy.
const (
	// ReasonShardUnreachable: a descriptor's owner shard did not answer in
	// time (down, slow past the deadline, or its circuit open).
	ReasonShardUnreachable = "shard_unreachable"
	// ReasonOverload: the router was overloaded and shed every such
	// descriptor without asking its shard.
	ReasonOverload = "overload"
)

// policyMetadata returns the dynamic_metadata that marks the descriptors
// at idx[j] whose decisions[j] were made by failure policy, nil when none
// was: the common answer costs nothing. The reason is overload only when
// every one of them was shed for overload.
func policyMetadata(idx []int, decisions []*shardlimitv1.Decision) *structpb.Struct {
	var marked []any
	reason := ReasonOverload
	for j, d := range decisions {
		if !d.FailurePolicy {
			continue
		}
		marked = append(marked, float64(idx[j]))
		if !d.Overload {
			reason = ReasonShardUnreachable
		}
	}
	if len(marked) == 0 {
		return nil
	}
	list, _ := structpb.NewList(marked) // numbers always convert
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			MetadataFailurePolicy: structpb.NewBoolValue(true),
			MetadataReason:        structpb.NewStringValue(reason),
			MetadataDescriptors:   structpb.NewListValue(list),
		}}),
	}}
}

// FailurePolicyOf reads the mark of policyMetadata from resp: whether
// descriptor i of its statuses was answered by failure policy, for each i,
// and the reason; nil and "" when resp carries no mark. Indexes outside
// the statuses are ignored.
func FailurePolicyOf(resp *rlsv3.RateLimitResponse) (byPolicy []bool, reason string) {
	ns := resp.GetDynamicMetadata().GetFields()[MetadataNamespace].GetStructValue().GetFields()
	if !ns[MetadataFailurePolicy].GetBoolValue() {
		return nil, ""
	}
	byPolicy = make([]bool, len(resp.GetStatuses()))
	for _, v := range ns[MetadataDescriptors].GetListValue().GetValues() {
		if i := v.GetNumberValue(); i >= 0 && i < float64(len(byPolicy)) && i == float64(int(i)) {
			byPolicy[int(i)] = true
		}
	}
	return byPolicy, ns[MetadataReason].GetStringValue()
}
