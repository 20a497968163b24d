package bench

import (
	"github.com/shardlimit/shardlimit/router/client"

	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// endpoint is where a worker sends: a gRPC connection, or, for APIHTTP, a
// router's HTTP/JSON API (an HTTP client of its own and the URL of
// /v1/check).
type endpoint struct {
	conn     *grpc.ClientConn
	goClient *client.Client // --api client, client-stream: the phase's one Go client
	client   *http.Client
	url      string
}

// close closes the endpoint's connections.
func (t endpoint) close() {
	if t.conn != nil {
		_ = t.conn.Close()
	}
	if t.client != nil {
		t.client.CloseIdleConnections()
	}
	if t.goClient != nil {
		_ = t.goClient.Close()
	}
}

// httpEndpoint is one HTTP client of the API at addr, over TLS when tlsCfg
// is set (HTTP/2, one connection, as a gRPC connection), else in plain
// text (HTTP/1.1, a connection per request in flight).
func httpEndpoint(addr string, tlsCfg *tls.Config, conns int) endpoint {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		tr.TLSClientConfig, tr.ForceAttemptHTTP2 = tlsCfg.Clone(), true
		// A router's TLS offers h2 only (for gRPC); net/http speaks it.
		tr.TLSClientConfig.NextProtos = nil
	}
	return endpoint{client: &http.Client{Transport: tr}, url: scheme + "://" + addr + "/v1/check"}
}

// httpRequest is the public API's request through the router's HTTP/JSON
// API: the same message as JSON, the same tally. Unlike gRPC's, its
// encoding allocates on every request, which the bench's CPU per request
// includes.
type httpRequest struct {
	publicRequest
	body bytes.Buffer
}

func (r *httpRequest) send(ctx context.Context, t endpoint) error {
	b, err := protojson.Marshal(r.req)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(b))
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		return status.Error(codes.Unavailable, err.Error()) // as gRPC calls a connection that fails
	}
	defer resp.Body.Close()
	r.body.Reset()
	if _, err := r.body.ReadFrom(io.LimitReader(resp.Body, 64<<20)); err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		return status.Error(codeOf(resp.StatusCode), fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(r.body.Bytes())))
	}
	if err := protojson.Unmarshal(r.body.Bytes(), r.resp); err != nil {
		return status.Error(codes.Internal, "answer: "+err.Error())
	}
	return nil
}

// codeOf is the gRPC code whose HTTP status the API answers (the errors
// are counted by gRPC code on every API).
func codeOf(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusNotImplemented, http.StatusMethodNotAllowed:
		return codes.Unimplemented
	}
	return codes.Unknown
}
