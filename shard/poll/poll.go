package poll

import (
	"testing"
	"time"
)

// Until calls cond every 10ms until it returns nil or timeout passes, then
// fails the test with cond's last error.
func Until(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
