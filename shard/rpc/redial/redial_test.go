package redial

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
)

// timeoutErr is what a try that got no SYN-ACK within SYNInterval returns.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// fakeTries makes dialTCP's tries return errs in turn (then dial for
// real), and counts them.
func fakeTries(t *testing.T, errs ...error) *int {
	t.Helper()
	n := new(int)
	real := dialOnce
	dialOnce = func(ctx context.Context, network, addr string) (net.Conn, error) {
		*n++
		if *n <= len(errs) {
			return nil, errs[*n-1]
		}
		return real(ctx, network, addr)
	}
	t.Cleanup(func() { dialOnce = real })
	return n
}

// TestDialTriesAgainWhileThePeerIsSilent: tries that time out (a peer
// that answers nothing) are followed by a new one, and the dial succeeds
// when a try does.
func TestDialTriesAgainWhileThePeerIsSilent(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	tries := fakeTries(t, timeoutErr{}, timeoutErr{})
	c, err := dialTCP(context.Background(), lis.Addr().String())
	if err != nil {
		t.Fatalf("dial after two silent tries: %v", err)
	}
	c.Close()
	if *tries != 3 {
		t.Errorf("tries: %d, want 3 (two silent, one answered)", *tries)
	}
}

// TestDialStopsAtARefusalOrTheAttemptsEnd: a refusal ends the dial at
// once (gRPC's backoff paces the next), and so does the attempt's end.
func TestDialStopsAtARefusalOrTheAttemptsEnd(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	tries := fakeTries(t, refused, refused)
	if _, err := dialTCP(context.Background(), "127.0.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused dial: err %v, want ECONNREFUSED", err)
	}
	if *tries != 1 {
		t.Errorf("tries after a refusal: %d, want 1", *tries)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tries = fakeTries(t, timeoutErr{}, timeoutErr{})
	if _, err := dialTCP(ctx, "127.0.0.1:1"); err == nil {
		t.Error("dial whose attempt ended: no error")
	}
	if *tries != 1 {
		t.Errorf("tries after the attempt ended: %d, want 1", *tries)
	}
}
