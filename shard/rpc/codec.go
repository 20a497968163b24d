package rpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shardlimit/shardlimit/shard/rpc/vtcodec"
)

// Invalid UTF-8 in a request's string field is the caller's mistake:
// every server answers it InvalidArgument naming the field ("checks[1].user:
// invalid UTF-8"). gRPC alone answers Internal with no field: protobuf
// rejects invalid UTF-8 in proto3 strings while decoding, and gRPC sends
// Internal for any decoding error at once, before a handler or interceptor
// can map it. So Listen installs codec, which decodes such a request as an
// empty message marked with the field's name (an unknown field numbered
// markerField), and RegisterService wraps every method so that a marked
// request is answered InvalidArgument before its handler sees it. Other
// decoding errors stay gRPC's Internal.

// markerField is the field number of the mark: the largest there is.
const markerField = protowire.MaxValidNumber

// codec is package vtcodec's proto codec, except for requests with
// invalid UTF-8.
type codec struct{ encoding.CodecV2 }

func newCodec() codec { return codec{vtcodec.Codec()} }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil || !invalidUTF8(err) {
		return err
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	field := utf8Field(data.Materialize(), m.ProtoReflect().Descriptor())
	if field == "" {
		field = "request"
	}
	proto.Reset(m)
	m.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, markerField, protowire.BytesType), field))
	return nil
}

// marked returns the error for a request that codec marked, or nil.
func marked(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	u := pm.ProtoReflect().GetUnknown()
	if len(u) == 0 {
		return nil
	}
	num, typ, n := protowire.ConsumeTag(u)
	if num != markerField || typ != protowire.BytesType {
		return nil
	}
	field, _ := protowire.ConsumeString(u[n:])
	return status.Errorf(codes.InvalidArgument, "%s: invalid UTF-8", field)
}

// invalidUTF8 reports whether protobuf rejected a message for invalid
// UTF-8 in a string field.
func invalidUTF8(err error) bool {
	var u interface{ InvalidUTF8() bool }
	return (errors.As(err, &u) && u.InvalidUTF8()) || strings.Contains(err.Error(), "invalid UTF-8")
}

// utf8Field returns the path of the first string field of message b (of
// type md) that holds invalid UTF-8, as "checks[1].user"; "" if none.
func utf8Field(b []byte, md protoreflect.MessageDescriptor) string {
	seen := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil {
			continue
		}
		name := string(fd.Name())
		if fd.Cardinality() == protoreflect.Repeated {
			name = fmt.Sprintf("%s[%d]", name, seen[num])
			seen[num]++
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return name
			}
		case protoreflect.MessageKind:
			if sub := utf8Field(v, fd.Message()); sub != "" {
				return name + "." + sub
			}
		}
	}
	return ""
}

// RegisterService registers a service implementation (Server is a
// grpc.ServiceRegistrar: pass it to the generated Register functions, not
// GRPC), with each method answering a request with invalid UTF-8
// InvalidArgument, naming the field, before its handler runs.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i := range d.Methods {
		h := d.Methods[i].Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(m any) error { return cmp.Or(dec(m), marked(m)) }, in)
		}
	}
	d.Streams = slices.Clone(desc.Streams)
	for i := range d.Streams {
		h := d.Streams[i].Handler
		d.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error { return h(srv, checkedStream{ss}) }
	}
	s.GRPC.RegisterService(&d, impl)
}

// GetServiceInfo returns the services registered, so that server
// reflection registers through Server too.
func (s *Server) GetServiceInfo() map[string]grpc.ServiceInfo { return s.GRPC.GetServiceInfo() }

// checkedStream answers a streamed request that codec marked
// InvalidArgument.
type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error { return cmp.Or(s.ServerStream.RecvMsg(m), marked(m)) }
