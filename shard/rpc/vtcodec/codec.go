package vtcodec

import (
	"sync/atomic"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// codec is the instance of the components' servers and of their
// connections to one another; callerCodec is the Go client's and the
// bench's.
var (
	codec       = vtCodec{base: encoding.GetCodecV2(protocodec.Name)}
	callerCodec = vtCodec{base: codec.base, checkSent: true}
)

// Codec returns gRPC's proto codec with vtprotobuf's generated code, for
// a server's grpc.ForceServerCodecV2 (shard/rpc's Listen forces it on
// every component's server). It refuses invalid UTF-8 in what it
// receives, and does not check what it sends (see vtCodec).
func Codec() encoding.CodecV2 { return codec }

// DialOption makes every call on a connection use Codec: a component's
// connections to another (shard/rpc's DialOptions: the router's to
// shards, a shard's to another).
func DialOption() grpc.DialOption { return grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec)) }

// CallerDialOption is DialOption for a caller's connections to routers
// (the Go client's and the bench's): it also refuses, as protobuf does,
// to send a request whose strings are not UTF-8, since they come from the
// caller's program.
func CallerDialOption() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.ForceCodecV2(callerCodec))
}

// generated is false while UseGenerated(false) holds.
var generated atomic.Bool

func init() { generated.Store(true) }

// UseGenerated turns vtprotobuf's code off (false: every message goes
// through protobuf) or on again (the default), in every server and
// connection that uses Codec, so that a benchmark compares the two in one
// process.
func UseGenerated(on bool) { generated.Store(on) }

// vtMessage is a message with vtprotobuf's generated code.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT(b []byte) (int, error)
	UnmarshalVT(b []byte) error
	Reset()
}

// vtCodec is gRPC's proto codec with vtprotobuf's code for the messages
// of the request path (requestPath), whose strings it checks for UTF-8 as
// protobuf does (validUTF8) when it receives them, and when it sends them
// if checkSent: a message with an invalid string goes to protobuf, which
// refuses it.
//
// A component sends without the check (protobuf's marshal checks them
// too): the strings of its answers and batches are ones it received
// through this check (a caller's service, endpoint and user, the key
// built from them), rule names (parsed from YAML, which is UTF-8), and
// its own messages. Checking them again cost the router 3-5% of its CPU
// at 100 checks per request (BENCHMARKS.md, issue 28). Should one still
// be invalid, its receiver refuses it.
type vtCodec struct {
	base      encoding.CodecV2
	checkSent bool
}

func (vtCodec) Name() string { return protocodec.Name }

func (c vtCodec) Marshal(v any) (mem.BufferSlice, error) {
	m := requestPath(v)
	if m == nil || (c.checkSent && !validUTF8(m)) {
		return c.base.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT(*buf); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c vtCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if unmarshalVT(data, v) {
		return nil
	}
	return c.base.Unmarshal(data, v)
}

// requestPath returns v as a vtMessage when v is one of the messages of
// the request path; nil for every other message (and for all while
// UseGenerated(false) holds).
func requestPath(v any) vtMessage {
	if !generated.Load() {
		return nil
	}
	switch m := v.(type) {
	case *shardlimitv1.CheckRequest, *shardlimitv1.CheckStreamRequest, *shardlimitv1.CheckResponse,
		*shardlimitv1.CheckStreamResponse, *shardlimitv1.DecideResponse, *shardlimitv1.DecideRequest,
		*shardlimitv1.DecideStreamRequest, *shardlimitv1.DecideStreamResponse:
		return m.(vtMessage)
	}
	return nil
}

// validUTF8 reports whether every string of m, a message of the request
// path, is UTF-8.
func validUTF8(m vtMessage) bool {
	switch m := m.(type) {
	case *shardlimitv1.CheckRequest:
		return checksUTF8(m.Checks)
	case *shardlimitv1.CheckStreamRequest:
		return checksUTF8(m.Checks) && mapUTF8(m.TraceContext)
	case *shardlimitv1.CheckResponse:
		return decisionsUTF8(m.Decisions)
	case *shardlimitv1.CheckStreamResponse:
		return utf8.ValidString(m.Message) && decisionsUTF8(m.Decisions)
	case *shardlimitv1.DecideRequest:
		return decideUTF8(m)
	case *shardlimitv1.DecideStreamRequest:
		return decideUTF8(m.Request)
	case *shardlimitv1.DecideStreamResponse:
		return utf8.ValidString(m.Error)
	}
	return true // DecideResponse: no strings
}

// unmarshalVT decodes data into v with vtprotobuf's code when v is one of
// the messages of the request path, and reports whether it did: false
// leaves v to protobuf (every other message; bytes vtprotobuf refuses; a
// string that is not UTF-8, which protobuf refuses naming the field).
func unmarshalVT(data mem.BufferSlice, v any) bool {
	m := requestPath(v)
	if m == nil {
		return false
	}
	// UnmarshalVT merges into what v holds, where protobuf's Unmarshal
	// replaces it: v is reset first (callers reuse their answers).
	m.Reset()
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		b = buf.ReadOnlyData()
	}
	if err := m.UnmarshalVT(b); err != nil || !validUTF8(m) {
		m.Reset()
		return false
	}
	return true
}

func checksUTF8(cs []*shardlimitv1.Check) bool {
	for _, c := range cs {
		if !utf8.ValidString(c.Service) || !utf8.ValidString(c.Endpoint) || !utf8.ValidString(c.User) ||
			!utf8.ValidString(c.ApiKey) || !utf8.ValidString(c.Ip) {
			return false
		}
	}
	return true
}

// decideUTF8 reports whether every string of a shard's batch is UTF-8
// (nil is a batch with none).
func decideUTF8(r *shardlimitv1.DecideRequest) bool {
	if r == nil {
		return true
	}
	for _, p := range r.Rules {
		if !utf8.ValidString(p.Name) {
			return false
		}
	}
	for _, c := range r.Checks {
		if !utf8.ValidString(c.Service) || !utf8.ValidString(c.Endpoint) || !utf8.ValidString(c.User) {
			return false
		}
	}
	return mapUTF8(r.TraceContext)
}

func decisionsUTF8(ds []*shardlimitv1.Decision) bool {
	for _, d := range ds {
		if !utf8.ValidString(d.Rule) {
			return false
		}
		for _, q := range d.Quotas {
			if !utf8.ValidString(q.Rule) {
				return false
			}
		}
	}
	return true
}

func mapUTF8(m map[string]string) bool {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}
