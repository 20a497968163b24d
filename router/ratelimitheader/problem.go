package ratelimitheader

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// The quota-exceeded problem type that the draft defines, answered as
// RFC 9457 problem details.
const (
	ProblemType        = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	ProblemTitle       = "Request cannot be satisfied as assigned quota has been exceeded"
	ProblemContentType = "application/problem+json"
)

// Problem is the body of a quota-exceeded answer: RFC 9457's members and
// the draft's violated-policies extension.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail says what to do, for a person reading it.
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies names the quota policies (rules) that denied.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// QuotaExceeded returns the problem of a request denied by the policies
// violated, answered with status (429).
func QuotaExceeded(status int, detail string, violated []string) Problem {
	return Problem{Type: ProblemType, Title: ProblemTitle, Status: status, Detail: detail, ViolatedPolicies: violated}
}

// Write answers p: its status, Content-Type application/problem+json and
// the JSON body. Headers set before stay.
func (p Problem) Write(w http.ResponseWriter) {
	// Not escaped for HTML (a detail's "<token>" stays readable): the
	// body is served as application/problem+json with nosniff.
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil { // a Problem always marshals
		panic("ratelimitheader: " + err.Error())
	}
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body.Bytes())
}
