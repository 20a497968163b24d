package rpctest

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawCodec sends and receives messages as bytes already encoded.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// Invoke calls the unary method (as "/package.Service/Method") on conn
// with req, an encoded request message, and discards the answer.
func Invoke(ctx context.Context, conn *grpc.ClientConn, method string, req []byte) error {
	var resp []byte
	return conn.Invoke(ctx, method, &req, &resp, grpc.ForceCodec(rawCodec{}))
}

// Stream opens the server-streaming method on conn, sends req and returns
// the error of the first answer.
func Stream(ctx context.Context, conn *grpc.ClientConn, method string, req []byte) error {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := s.SendMsg(&req); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var resp []byte
	return s.RecvMsg(&resp)
}

// String appends field num holding s to a message being encoded.
func String(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// Message appends field num holding the encoded message m.
func Message(b []byte, num protowire.Number, m []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), m)
}
