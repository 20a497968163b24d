package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
)

// The Go client's APIs (--api client, client-stream): every worker calls
// router/client's CheckOne for one check on one Client shared by the
// phase, as a service's goroutines do, over unary Check (client) or the
// client's coalescing CheckStream (client-stream, Options.Stream). The
// client's answers by its failure mode count as failure policy.

// goClientEndpoint makes the phase's one Client over addrs. Its timeout
// is the bench's --timeout, so that a slow answer on a loaded machine is
// measured as latency, not answered by failure mode; it makes one attempt.
func goClientEndpoint(addrs []string, tlsCfg *tls.Config, stream bool, timeout time.Duration) (endpoint, error) {
	c, err := client.New(client.Options{Routers: addrs, TLS: tlsCfg, Insecure: tlsCfg == nil, Timeout: timeout,
		MaxAttempts: 1, Stream: stream})
	if err != nil {
		return endpoint{}, fmt.Errorf("go client: %w", err)
	}
	return endpoint{goClient: c}, nil
}

// goClientRequest is one worker's check through the Go client.
type goClientRequest struct {
	chk client.Check
	d   client.Decision
}

func newGoClientRequest(o *Options) *goClientRequest {
	return &goClientRequest{chk: client.Check{Service: o.Service, Endpoint: o.Endpoint, Hits: 1}}
}

func (r *goClientRequest) draw(p *picker, names []string) { r.chk.User = p.user(names) }

func (r *goClientRequest) send(ctx context.Context, t endpoint) error {
	d, err := t.goClient.CheckOne(ctx, r.chk)
	r.d = d
	return err
}

func (r *goClientRequest) tally(s *stats) bool {
	s.count(r.d.FromFailureMode || r.d.FailurePolicy, r.d.Allowed, r.d.Rule)
	return true
}
