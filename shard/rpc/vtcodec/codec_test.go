package vtcodec

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

func hits(n int64) *int64 { return &n }

// The messages of the request path, with every field set.
var messages = []proto.Message{
	&shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{
		{Service: "shop", Endpoint: "/checkout", User: "alice", Hits: hits(0), ApiKey: "k", Ip: "10.0.0.1"},
		{Service: "shop", Endpoint: "/search", User: "bob"},
	}},
	&shardlimitv1.CheckStreamRequest{Id: 7, Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/e", User: "u", Hits: hits(3)}}},
	&shardlimitv1.CheckResponse{Decisions: []*shardlimitv1.Decision{{
		Allowed: true, Limit: 10, Remaining: 9, ResetAfter: durationpb.New(6e9), RetryAfter: durationpb.New(0), Rule: "r",
		FailurePolicy: true, Delay: durationpb.New(1), SoftAllowanceUsed: true, Shadow: true, ShadowDenied: true, Overload: true,
		Window: durationpb.New(6e10), NextAfter: durationpb.New(5),
		Quotas: []*shardlimitv1.Quota{{Rule: "q", Limit: 1, Window: durationpb.New(1e9), RetryAfter: durationpb.New(2)}},
	}}},
	&shardlimitv1.CheckStreamResponse{Id: 9, Code: 3, Message: "checks[0].user: too long"},
	&shardlimitv1.DecideResponse{Decisions: []*shardlimitv1.ShardDecision{{Allowed: true, Limit: 5, Remaining: 4, ResetAfterNs: 7, NotDecided: true}}},
	decide,
	&shardlimitv1.DecideStreamRequest{Batch: 3, Request: decide},
	&shardlimitv1.DecideStreamResponse{Batch: 4, Error: "checks[0].hits: negative",
		Response: &shardlimitv1.DecideResponse{Decisions: []*shardlimitv1.ShardDecision{{Limit: 1, NextAfterNs: 2}}}},
}

// decide is a shard's batch with every field set.
var decide = &shardlimitv1.DecideRequest{
	Rules: []*shardlimitv1.RuleParams{{Name: "r", Algorithm: shardlimitv1.Algorithm_ALGORITHM_GCRA, Limit: 10, PeriodNs: 1e9,
		Burst: 2, MaxDelayNs: 3, SoftPercent: 4, ElasticPercent: 5, ElasticLoadPercent: 6, Shadow: true}},
	Checks: []*shardlimitv1.ShardCheck{{Service: "shop", Endpoint: "/e", User: "alice", Hits: 2, Rule: 0,
		Partition: 7, Refund: true, Hash: 1 << 60}},
	TraceContext: map[string]string{"traceparent": "00-1"},
	Forwarded:    true,
}

// The codec writes the bytes protobuf writes and reads back what
// protobuf reads, into messages that held something before (callers
// reuse answers); linking it leaves gRPC's registered proto codec alone.
func TestSameWireAsProtobuf(t *testing.T) {
	if _, ok := encoding.GetCodecV2(protocodec.Name).(vtCodec); ok {
		t.Fatal("the package registered its codec as gRPC's proto codec, for every connection of the process")
	}
	c := Codec()
	for _, m := range messages {
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("%T: marshal differs from protobuf's", m)
		}
		back := m.ProtoReflect().New().Interface()
		for range 2 { // the second time into a message that holds the first
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(want)}, back); err != nil {
				t.Fatal(err)
			}
		}
		if !proto.Equal(back, m) {
			t.Errorf("%T: unmarshal gave %v, want %v", m, back, m)
		}
	}
}

// A caller's string that is not UTF-8 is refused as protobuf refuses it
// (shard/rpc's codec then names the field), not let through.
func TestInvalidUTF8IsRefusedAsByProtobuf(t *testing.T) {
	for _, bad := range []proto.Message{
		&shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/e", User: "u"}}},
		&shardlimitv1.DecideStreamRequest{Batch: 1, Request: &shardlimitv1.DecideRequest{
			Checks: []*shardlimitv1.ShardCheck{{Service: "s", Endpoint: "/e", User: "u"}}}},
	} {
		b, err := proto.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte("u"), []byte{0xff}, 1) // the user, one byte as before
		err = Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, bad.ProtoReflect().New().Interface())
		want := proto.Unmarshal(b, bad.ProtoReflect().New().Interface())
		if err == nil || want == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("%T: unmarshal: %v; protobuf's: %v; want both to refuse invalid UTF-8", bad, err, want)
		}
	}
}

// badMessages are messages of the request path, each with one string
// that is not UTF-8.
var badMessages = []proto.Message{
	&shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/e", User: "\xff"}}},
	&shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/e", User: "u", Ip: "\xc3"}}},
	&shardlimitv1.CheckStreamRequest{Id: 1, Checks: []*shardlimitv1.Check{{Service: "s\x80", Endpoint: "/e", User: "u"}}},
	&shardlimitv1.CheckStreamRequest{Id: 1, TraceContext: map[string]string{"traceparent": "\xff"}},
	&shardlimitv1.CheckResponse{Decisions: []*shardlimitv1.Decision{{Rule: "\xff"}}},
	&shardlimitv1.CheckStreamResponse{Id: 1, Message: "\xff"},
	&shardlimitv1.DecideRequest{Checks: []*shardlimitv1.ShardCheck{{Service: "s", Endpoint: "/e", User: "\xff"}}},
	&shardlimitv1.DecideStreamRequest{Request: &shardlimitv1.DecideRequest{Rules: []*shardlimitv1.RuleParams{{Name: "\xff"}}}},
	&shardlimitv1.DecideStreamResponse{Error: "\xff"},
}

// A caller's connection does not send a message of the request path with
// a string that is not UTF-8: marshal refuses it as protobuf does,
// whichever string it is.
func TestCallerMarshalRefusesInvalidUTF8(t *testing.T) {
	for _, bad := range badMessages {
		_, err := callerCodec.Marshal(bad)
		if _, want := proto.Marshal(bad); err == nil || want == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%T %v: marshal: %v; protobuf's: %v; want both to refuse invalid UTF-8", bad, bad, err, want)
		}
	}
}

// A component does not check again what it sends, but should a string be
// invalid, the receiving component refuses it as protobuf would.
func TestComponentSendsUncheckedReceiverRefuses(t *testing.T) {
	for _, bad := range badMessages {
		b, err := Codec().Marshal(bad)
		if err != nil {
			t.Fatalf("%T %v: marshal: %v, want the bytes unchecked", bad, bad, err)
		}
		err = Codec().Unmarshal(b, bad.ProtoReflect().New().Interface())
		if err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%T %v: unmarshal: %v, want invalid UTF-8 refused", bad, bad, err)
		}
	}
}
