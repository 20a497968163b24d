package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// startProgress rewrites one line on w, with \r, once a second while a
// load runs: elapsed seconds, the last second's rate and p99, and the
// errors so far. It reads the workers' atomic counters, never locking
// them. The returned function stops it and blanks the line. With a nil w
// it does nothing.
func startProgress(w io.Writer, phase string, ws []*worker) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		start := time.Now()
		var prev snapshot
		var prevReq uint64
		width := 0
		for {
			select {
			case <-done:
				if width > 0 {
					fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", width))
				}
				return
			case now := <-tick.C:
				var cur snapshot
				var req, errs uint64
				for _, wk := range ws {
					cur.add(&wk.st.hist)
					req += wk.st.requests.Load()
					errs += wk.st.errors.Load()
				}
				last := cur.minus(&prev)
				line := fmt.Sprintf("%s %3ds  %s req/s  p99 %s  errors %s",
					phase, int(now.Sub(start).Seconds()+0.5), group(float64(req-prevReq)), ms(us(last.quantile(0.99))), group(float64(errs)))
				pad := max(width-len(line), 0)
				fmt.Fprintf(w, "\r%s%s", line, strings.Repeat(" ", pad))
				width = len(line)
				prev, prevReq = cur, req
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
