package limiter

// leakyBucket is a queue of Capacity hits that drains at Limit per Period,
// one hit every T = Period/Limit. The state is the time at which the queue
// will be empty, a mixed number kept by storeTime; a zero state is an empty
// queue. At now the queue holds (max(empty, now) − now)/T hits, and that
// time is the wait of a request arriving now: it is served when the hits
// ahead of it have drained.
//
// A request of n hits is allowed at now when it fits in the queue,
// max(empty, now) + n·T <= now + Capacity·T, and its wait is at most the
// longest wait (Rule.MaxDelay, or when it is 0 the queue's whole drain
// time Capacity·T, which any request that fits waits less than); then
// empty becomes max(empty, now) + n·T, and Decision.Delay tells the
// caller how long to wait before going ahead.
func leakyBucket(d *Decision, s *State, now int64, r *Rule, hits int64) {
	den := r.Limit
	capacity := r.Capacity()
	nowM := mixed{now, 0}
	drain := mulDiv(capacity, r.Period, den) // the whole queue's drain time
	maxWait := drain
	if r.MaxDelay != 0 {
		maxWait = mixed{r.MaxDelay, 0}
	}
	empty := loadBacklog(s, now, r).max(nowM) // when a request arriving now is served
	full := nowM.add(drain, den)
	wait := empty.sub(nowM, den)
	*d = Decision{Limit: r.Limit, Delay: wait.ceil()}
	switch {
	case hits < 0 || hits > capacity:
		d.RetryAfter = Never
	case hits == 0:
		d.Allowed = true
	default:
		end := empty.add(mulDiv(hits, r.Period, den), den)
		over, late := full.less(end), maxWait.less(wait)
		if !over && !late {
			d.Allowed = true
			empty = end
			storeTime(s, empty, den)
			break
		}
		// Waiting w drains w worth of queue: the request fits once
		// w >= end − full and waits little enough once w >= wait − MaxDelay.
		if over {
			d.RetryAfter = end.sub(full, den).ceil()
		}
		if late {
			d.RetryAfter = max(d.RetryAfter, wait.sub(maxWait, den).ceil())
		}
	}
	left := empty.sub(nowM, den) // the wait of the next request
	if !maxWait.less(left) {
		d.Remaining = full.sub(empty, den).floorDiv(r.Period, den)
	}
	d.ResetAfter = left.ceil()
	// Remaining grows when the queue drains by one more hit. While the
	// wait is over MaxDelay it is 0, and grows once the wait is within
	// MaxDelay and the queue has room for a hit (holds at most
	// Capacity−1): then it is all the room there is.
	if !maxWait.less(left) {
		d.NextAfter = nextToken(left, capacity, r.Period, den)
		return
	}
	room := left.sub(mulDiv(capacity-1, r.Period, den), den) // the wait until one hit fits
	d.NextAfter = left.sub(maxWait, den).ceil()
	if !room.less(mixed{}) {
		d.NextAfter = max(d.NextAfter, room.ceil())
	}
}
