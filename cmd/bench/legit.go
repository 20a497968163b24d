package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// Legitimate users: a fixed set checked on a schedule of their own beside
// the load, whose decisions are reported apart so that two runs (with and
// without a flood) compare exactly. Even-numbered users are sent
// LegitChecks checks, odd-numbered ones half as many, in rounds spread
// evenly over the measured phase (a round per check of the busiest user).
// Under a rule whose period is longer than the run and whose limit lies
// between the two counts (the sliding_log rule of
// cmd/bench/testdata/flood-rules.yaml: 100 per hour, with the default 150
// checks), each even user is allowed exactly the limit and denied the
// rest, and each odd user is allowed every check, however the rounds fall
// in time: any other count means a counter was lost (evicted) or a check
// was answered by failure policy.

// Legit is the legitimate users' decisions, by group.
type Legit struct {
	Groups []LegitGroup `json:"groups"`
}

// LegitGroup is the users sent the same number of checks.
type LegitGroup struct {
	Users         int    `json:"users"`
	ChecksPerUser int    `json:"checks_per_user"`
	Allowed       uint64 `json:"allowed"`
	Denied        uint64 `json:"denied"`
	FailurePolicy uint64 `json:"failure_policy"`
	// Errors counts checks of failed requests, whose decisions are unknown.
	Errors uint64 `json:"errors"`
	// MinAllowed and MaxAllowed are the fewest and most checks allowed to
	// one user of the group: equal when every user got the same answers.
	MinAllowed uint64 `json:"min_allowed"`
	MaxAllowed uint64 `json:"max_allowed"`
}

// legitPrefix makes the legitimate users new in every run, as the flood's
// are, so that a run never starts from another run's counts.
var legitPrefix = "legit-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"

// legitChecks returns the checks user i of the legitimate set is sent.
func legitChecks(o *Options, i int) int {
	if i%2 == 1 {
		return o.LegitChecks / 2
	}
	return o.LegitChecks
}

// legitRun checks the legitimate users on their schedule over span,
// starting now; wait returns their decisions once every round was sent.
type legitRun struct {
	o                               *Options
	conn                            *grpc.ClientConn
	allowed, denied, policy, errors []uint64 // per user
	done                            sync.WaitGroup
}

func startLegit(ctx context.Context, o *Options, conn *grpc.ClientConn, span time.Duration) *legitRun {
	n := o.Legit
	l := &legitRun{o: o, conn: conn, allowed: make([]uint64, n), denied: make([]uint64, n), policy: make([]uint64, n), errors: make([]uint64, n)}
	start := time.Now()
	l.done.Go(func() {
		rounds := o.LegitChecks
		for r := range rounds {
			if d := time.Until(start.Add(span * time.Duration(r) / time.Duration(rounds))); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			l.round(ctx, r)
		}
	})
	return l
}

// round sends one check to every user still due one in round r, in
// requests of at most o.Checks checks.
func (l *legitRun) round(ctx context.Context, r int) {
	var users []int
	flush := func() {
		if len(users) == 0 {
			return
		}
		req := &shardlimitv1.CheckRequest{Checks: make([]*shardlimitv1.Check, len(users))}
		for j, i := range users {
			req.Checks[j] = &shardlimitv1.Check{Service: l.o.Service, Endpoint: l.o.Endpoint, User: legitPrefix + strconv.Itoa(i)}
		}
		callCtx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		defer cancel()
		resp := &shardlimitv1.CheckResponse{}
		err := l.conn.Invoke(callCtx, shardlimitv1.RateLimiter_Check_FullMethodName, req, resp)
		for j, i := range users {
			switch {
			case err != nil || len(resp.Decisions) != len(users):
				l.errors[i]++
			case resp.Decisions[j].FailurePolicy:
				l.policy[i]++
			case resp.Decisions[j].Allowed:
				l.allowed[i]++
			default:
				l.denied[i]++
			}
		}
		users = users[:0]
	}
	for i := range l.o.Legit {
		if r < legitChecks(l.o, i) {
			users = append(users, i)
			if len(users) == l.o.Checks {
				flush()
			}
		}
	}
	flush()
}

// wait waits for the last round and sums the decisions by group.
func (l *legitRun) wait() *Legit {
	l.done.Wait()
	out := &Legit{}
	for parity := range min(2, l.o.Legit) {
		g := LegitGroup{ChecksPerUser: legitChecks(l.o, parity), MinAllowed: ^uint64(0)}
		for i := parity; i < l.o.Legit; i += 2 {
			g.Users++
			g.Allowed += l.allowed[i]
			g.Denied += l.denied[i]
			g.FailurePolicy += l.policy[i]
			g.Errors += l.errors[i]
			g.MinAllowed = min(g.MinAllowed, l.allowed[i])
			g.MaxAllowed = max(g.MaxAllowed, l.allowed[i])
		}
		out.Groups = append(out.Groups, g)
	}
	return out
}

// String is the report's line for a group.
func (g *LegitGroup) String() string {
	return fmt.Sprintf("%s users × %d checks: allowed %s (%s–%s per user), denied %s, failure policy %s, errors %s",
		group(float64(g.Users)), g.ChecksPerUser, group(float64(g.Allowed)), group(float64(g.MinAllowed)), group(float64(g.MaxAllowed)),
		group(float64(g.Denied)), group(float64(g.FailurePolicy)), group(float64(g.Errors)))
}
