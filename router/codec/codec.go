package codec

import (
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// protobuf is gRPC's own proto codec, as registered before init.
var protobuf = encoding.GetCodecV2(protocodec.Name)

func init() { Register(true) }

// Register makes gRPC's "proto" codec vtprotobuf's (vt, as init does) or
// protobuf's own again, for the servers and calls that start after it:
// benchmarks compare the two in one run. Not safe while gRPC serves.
func Register(vt bool) {
	if vt {
		encoding.RegisterCodecV2(vtCodec{base: protobuf})
	} else {
		encoding.RegisterCodecV2(protobuf)
	}
}

// vtMarshaler is a message with vtprotobuf's generated marshal code.
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT(b []byte) (int, error)
}

// vtCodec is gRPC's proto codec with vtprotobuf's code where there is
// some: marshal for every shardlimit message, unmarshal for those that
// carry no caller's strings or whose strings it checks (unmarshalVT).
type vtCodec struct{ base encoding.CodecV2 }

func (vtCodec) Name() string { return protocodec.Name }

func (c vtCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMarshaler)
	if !ok {
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

// unmarshalVT decodes data into v with vtprotobuf's code when v is one of
// the messages of the request path, and reports whether it did: false
// leaves v to protobuf (every other message; bytes vtprotobuf refuses; a
// string that is not UTF-8, which protobuf refuses naming the field).
func unmarshalVT(data mem.BufferSlice, v any) bool {
	var ok func() bool
	var unmarshal func([]byte) error
	// UnmarshalVT merges into what v holds, where protobuf's Unmarshal
	// replaces it: v is reset first (callers reuse their answers).
	switch m := v.(type) {
	case *shardlimitv1.CheckRequest:
		unmarshal, ok = m.UnmarshalVT, func() bool { return checksUTF8(m.Checks) }
	case *shardlimitv1.CheckStreamRequest:
		unmarshal, ok = m.UnmarshalVT, func() bool { return checksUTF8(m.Checks) && mapUTF8(m.TraceContext) }
	case *shardlimitv1.CheckResponse:
		unmarshal, ok = m.UnmarshalVT, func() bool { return decisionsUTF8(m.Decisions) }
	case *shardlimitv1.CheckStreamResponse:
		unmarshal, ok = m.UnmarshalVT, func() bool { return utf8.ValidString(m.Message) && decisionsUTF8(m.Decisions) }
	case *shardlimitv1.DecideResponse: // no strings
		unmarshal, ok = m.UnmarshalVT, func() bool { return true }
	case *shardlimitv1.DecideRequest:
		unmarshal, ok = m.UnmarshalVT, func() bool { return decideUTF8(m) }
	case *shardlimitv1.DecideStreamRequest:
		unmarshal, ok = m.UnmarshalVT, func() bool { return decideUTF8(m.Request) }
	case *shardlimitv1.DecideStreamResponse:
		unmarshal, ok = m.UnmarshalVT, func() bool { return utf8.ValidString(m.Error) }
	default:
		return false
	}
	v.(interface{ Reset() }).Reset()
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		b = buf.ReadOnlyData()
	}
	if err := unmarshal(b); err != nil || !ok() {
		v.(interface{ Reset() }).Reset()
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
