package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// DenyStatusParam is the query parameter of /v1/check that asks for 429
// Too Many Requests when a check is denied: deny_status=429. Absent, or
// 200, a denial is answered 200 with allowed false, as gRPC answers OK.
const DenyStatusParam = "deny_status"

// request is what the middleware learns of a request before the gateway
// decodes it, for the error handler and denyStatus.
type request struct {
	maxBody  int64
	tooLarge bool // the body is over maxBody
	want429  bool // deny_status=429
}

type requestKey struct{}

func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// bounded refuses a body over maxBody (413) and reads the query: the API
// takes its request from the body, and reads only deny_status, on
// /v1/check; any other parameter is refused (400), so a misspelt one is
// not silently ignored.
func bounded(maxBody int64, mux *runtime.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &request{maxBody: maxBody}
		r = r.WithContext(context.WithValue(r.Context(), requestKey{}, st))
		fail := func(err error) {
			_, out := runtime.MarshalerForRequest(mux, r)
			runtime.HTTPError(r.Context(), mux, out, w, r, err)
		}
		if r.ContentLength > maxBody {
			st.tooLarge = true
			fail(status.Error(codes.InvalidArgument, "body too large"))
			return
		}
		for name, vals := range r.URL.Query() {
			if name != DenyStatusParam || r.URL.Path != "/v1/check" {
				fail(status.Errorf(codes.InvalidArgument, "query parameter %q: unknown (the request is the JSON body; /v1/check reads only %s)", name, DenyStatusParam))
				return
			}
			switch {
			case len(vals) == 1 && vals[0] == "429":
				st.want429 = true
			case len(vals) == 1 && vals[0] == "200":
			default:
				fail(status.Errorf(codes.InvalidArgument, "%s: must be 200 (the default) or 429", DenyStatusParam))
				return
			}
		}
		r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, maxBody), st: st}
		mux.ServeHTTP(w, r)
	})
}

// limitedBody notes when the body went over its bound.
type limitedBody struct {
	io.ReadCloser
	st *request
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.st.tooLarge = true
	}
	return n, err
}

// errorHandler is grpc-gateway's, but for a body over the bound, answered
// 413 naming the bound, and 401s, whose WWW-Authenticate header (which
// HTTP requires of them) is a challenge, not grpc-gateway's copy of the
// message.
func errorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if st := requestOf(r.Context()); st != nil && st.tooLarge {
		writeStatus(w, m, http.StatusRequestEntityTooLarge, status.New(codes.InvalidArgument, fmt.Sprintf("body: larger than the maximum of %d bytes (--http-max-body)", st.maxBody)))
		return
	}
	if status.Code(err) == codes.Unauthenticated {
		w = challenge{w}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
}

// routingErrorHandler is grpc-gateway's, but answers a route called with
// another method than POST 405 with an Allow header, where grpc-gateway
// answers 501.
func routingErrorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
		writeStatus(w, m, code, status.New(codes.Unimplemented, r.URL.Path+": only POST is served"))
		return
	}
	runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
}

// writeStatus answers st as JSON with HTTP status code.
func writeStatus(w http.ResponseWriter, m runtime.Marshaler, code int, st *status.Status) {
	body, _ := m.Marshal(st.Proto())
	w.Header().Set("Content-Type", m.ContentType(nil))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// challenge sets WWW-Authenticate as the status is written.
type challenge struct{ http.ResponseWriter }

func (c challenge) WriteHeader(code int) {
	c.Header().Set("WWW-Authenticate", `Bearer realm="shardlimit"`)
	c.ResponseWriter.WriteHeader(code)
}

// denyStatus answers a denial 429 where asked: a CheckResponse with a
// denied check when the request said deny_status=429, with Retry-After
// the longest retry_after of its denied checks in whole seconds (rounded
// up; absent when zero); Envoy's RateLimitResponse whenever its
// overall_code is OVER_LIMIT, as envoy ratelimit's /json does.
func denyStatus(ctx context.Context, w http.ResponseWriter, m proto.Message) error {
	switch resp := m.(type) {
	case *shardlimitv1.CheckResponse:
		if st := requestOf(ctx); st == nil || !st.want429 {
			return nil
		}
		denied, retry := false, time.Duration(0)
		for _, d := range resp.Decisions {
			if !d.Allowed {
				denied, retry = true, max(retry, d.GetRetryAfter().AsDuration())
			}
		}
		if !denied {
			return nil
		}
		// A denial never lifted (more hits than the rule ever allows)
		// advertises no time.
		if s := ratelimitheader.Seconds(retry); s > 0 && retry <= ratelimitheader.Never {
			w.Header().Set("Retry-After", strconv.FormatInt(s, 10))
		}
		w.WriteHeader(http.StatusTooManyRequests)
	case *rlsv3.RateLimitResponse:
		if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}
	return nil
}
