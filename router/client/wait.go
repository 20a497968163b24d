package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of Wait.
var (
	// ErrWaitPastDeadline: the check is denied and its retry time (or,
	// allowed, its queueing Delay) ends after the context's deadline, so
	// Wait returned at once instead of sleeping in vain, as
	// rate.Limiter.Wait does.
	ErrWaitPastDeadline = errors.New("shardlimit client: the wait would end past the context's deadline")
	// ErrNeverAllowed: the check is denied and no wait lifts the denial
	// (its hits are over what the rule ever allows).
	ErrNeverAllowed = errors.New("shardlimit client: the check can never be allowed")
)

// minWait is the shortest sleep between two checks of Wait, so that a
// denial with a zero RetryAfter (none is sent, but a router is not to be
// trusted with a busy loop) cannot spin.
const minWait = time.Millisecond

// Wait is CheckOne for callers that would rather wait than be denied, as
// with rate.Limiter.Wait: while chk is denied, it sleeps until the
// decision's RetryAfter and checks again, until allowed; then, for a
// leaky_bucket rule, it sleeps the decision's Delay (the request's wait in
// the queue) before returning it. Every attempt is a check of its own (a
// denied one consumes nothing), so other callers of the same key may pass
// first.
//
// ctx bounds it all. When the next wake-up would come after ctx's
// deadline, Wait returns at once with ErrWaitPastDeadline and the last
// decision, without sleeping; when ctx ends during a sleep, it returns
// ctx's error wrapped. An allowed check that then has to wait its Delay
// past the deadline has consumed its hits: the caller owns that quota
// but did not get to wait for it. A denial that no wait lifts returns
// ErrNeverAllowed. Errors of CheckOne are returned as they are; a denial
// by the client's failure mode (FailClosed) is waited out like any other.
func (c *Client) Wait(ctx context.Context, chk Check) (Decision, error) {
	for {
		d, err := c.CheckOne(ctx, chk)
		if err != nil {
			return d, err
		}
		wait := d.Delay
		if !d.Allowed {
			if d.NeverAllowed {
				return d, ErrNeverAllowed
			}
			wait = max(d.RetryAfter, minWait)
		}
		if wait <= 0 {
			return d, nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return d, fmt.Errorf("%w: %v to wait, %v left", ErrWaitPastDeadline, wait, time.Until(dl).Round(time.Millisecond))
		}
		if !sleep(ctx, wait) {
			return d, fmt.Errorf("shardlimit client: wait: %w", ctx.Err())
		}
		if d.Allowed {
			return d, nil
		}
	}
}
