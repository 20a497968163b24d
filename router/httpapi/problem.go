package httpapi

import (
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// ProblemBase prefixes every problem type URI of the API's errors: the
// type of a refused request is ProblemBase + the kind's name (README.md,
// "HTTP/JSON", lists them).
const ProblemBase = "https://shardlimit.dev/problems/"

// kind is one kind of error: its problem type (the name after
// ProblemBase), title and HTTP status.
type kind struct {
	name   string
	title  string
	status int
}

// The kinds of error the API answers. The services' errors arrive as gRPC
// statuses (they map their sentinel errors to codes, router.toStatus and
// envoy.toStatus); byCode maps each code to its kind, here and nowhere
// else. Codes the services never answer on these routes are internal.
var (
	invalidArgument  = kind{"invalid-argument", "The request is invalid", http.StatusBadRequest}
	unauthenticated  = kind{"unauthenticated", "No valid credentials", http.StatusUnauthorized}
	permissionDenied = kind{"permission-denied", "The caller's grant does not hold the service", http.StatusForbidden}
	unknownService   = kind{"unknown-service", "The service has no rules", http.StatusNotFound}
	unavailable      = kind{"unavailable", "The router cannot answer now", http.StatusServiceUnavailable}
	deadlineExceeded = kind{"deadline-exceeded", "The router did not answer in time", http.StatusGatewayTimeout}
	canceled         = kind{"canceled", "The request was canceled", 499}
	internal         = kind{"internal", "Internal error", http.StatusInternalServerError}

	// Kinds of the HTTP layer, before any service is called.
	bodyTooLarge     = kind{"body-too-large", "The request body is too large", http.StatusRequestEntityTooLarge}
	noRoute          = kind{"not-found", "No such path", http.StatusNotFound}
	methodNotAllowed = kind{"method-not-allowed", "Only POST is served", http.StatusMethodNotAllowed}

	byCode = map[codes.Code]kind{
		codes.InvalidArgument:  invalidArgument,
		codes.Unauthenticated:  unauthenticated,
		codes.PermissionDenied: permissionDenied,
		codes.NotFound:         unknownService,
		codes.Unavailable:      unavailable,
		codes.DeadlineExceeded: deadlineExceeded,
		codes.Canceled:         canceled,
	}
)

// kindOf is the kind of a service's error: by its gRPC code, internal for
// any code not listed (never 429, which only a denial is answered).
func kindOf(st *status.Status) kind {
	if k, ok := byCode[st.Code()]; ok {
		return k
	}
	return internal
}

// problem answers an error of kind k as RFC 9457 problem details
// (application/problem+json): type, title, status, and detail, the
// error's message, which names the field and the bound.
func problem(w http.ResponseWriter, k kind, detail string) {
	ratelimitheader.Problem{Type: ProblemBase + k.name, Title: k.title, Status: k.status, Detail: detail}.Write(w)
}
