package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// errorHandler answers every error of the API as RFC 9457 problem
// details, of the kind its gRPC code says (problem.go), but for a body
// over the bound: 413, naming the bound. A 401 carries WWW-Authenticate,
// which HTTP requires of it: a Bearer challenge.
func errorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if st := requestOf(r.Context()); st != nil && st.tooLarge {
		problem(w, bodyTooLarge, fmt.Sprintf("body: larger than the maximum of %d bytes (--http-max-body)", st.maxBody))
		return
	}
	st := status.Convert(err)
	k := kindOf(st)
	if k == unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shardlimit"`)
	}
	problem(w, k, st.Message())
}

// routingErrorHandler answers a request no route serves: a path the API
// does not serve 404, a route called with another method than POST 405
// with an Allow header (grpc-gateway answers 501), anything else by its
// status, with the problem type about:blank (RFC 9457: no more to say
// than the status).
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	switch code {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
		problem(w, methodNotAllowed, r.URL.Path+": only POST is served")
	case http.StatusNotFound:
		problem(w, noRoute, r.URL.Path+": not served (the API serves POST /v1/check and POST /json)")
	default:
		ratelimitheader.Problem{Type: "about:blank", Title: http.StatusText(code), Status: code}.Write(w)
	}
}

// answerHeaders sets the headers of an answer. A CheckResponse of one
// check gets the RateLimit-Policy and RateLimit fields of its rules'
// counters (ratelimitheader.Advertised: none for an answer by failure
// policy or a shadow rule) and, when denied, Retry-After; one of several
// checks gets none (its rules' fields would mix users). Asked with
// deny_status=429, an answer with any check denied is a 429, with
// Retry-After the longest retry_after of its denied checks. Retry-After
// is whole seconds rounded up, at least 1, and absent for a denial never
// lifted (more hits than the rule ever allows). Envoy's RateLimitResponse
// is a 429 whenever its overall_code is OVER_LIMIT, as envoy ratelimit's
// /json does.
func answerHeaders(ctx context.Context, w http.ResponseWriter, m proto.Message) error {
	switch resp := m.(type) {
	case *shardlimitv1.CheckResponse:
		if len(resp.Decisions) == 1 {
			ratelimitheader.SetFields(w.Header(), ratelimitheader.Advertised(answersOf(resp.Decisions[0])))
		}
		denied, retry := false, time.Duration(0)
		for _, d := range resp.Decisions {
			if !d.Allowed {
				denied, retry = true, max(retry, d.GetRetryAfter().AsDuration())
			}
		}
		want429 := denied && requestOf(ctx) != nil && requestOf(ctx).want429
		if denied && (len(resp.Decisions) == 1 || want429) {
			if s, ok := ratelimitheader.RetryAfter(retry); ok {
				w.Header().Set(ratelimitheader.RetryAfterField, s)
			}
		}
		if want429 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	case *rlsv3.RateLimitResponse:
		if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}
	return nil
}

// answersOf is every rule's answer in d: its quotas when several rules
// applied, else its own.
func answersOf(d *shardlimitv1.Decision) []ratelimitheader.Answer {
	if qs := d.GetQuotas(); len(qs) > 0 {
		as := make([]ratelimitheader.Answer, len(qs))
		for i, q := range qs {
			as[i] = ratelimitheader.Answer{
				Rule: q.GetRule(), Limit: q.GetLimit(), Window: q.GetWindow().AsDuration(), Allowed: q.GetAllowed(),
				Remaining: q.GetRemaining(), RetryAfter: q.GetRetryAfter().AsDuration(), NextAfter: q.GetNextAfter().AsDuration(),
				FailurePolicy: q.GetFailurePolicy(), Shadow: q.GetShadow(),
			}
		}
		return as
	}
	return []ratelimitheader.Answer{{
		Rule: d.GetRule(), Limit: d.GetLimit(), Window: d.GetWindow().AsDuration(), Allowed: d.GetAllowed(),
		Remaining: d.GetRemaining(), RetryAfter: d.GetRetryAfter().AsDuration(), NextAfter: d.GetNextAfter().AsDuration(),
		FailurePolicy: d.GetFailurePolicy(), Shadow: d.GetShadow(),
	}}
}
