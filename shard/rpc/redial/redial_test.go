package redial

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// timeoutErr is what a try that got no SYN-ACK within SYNInterval returns.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var refused = &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}

// fakeTries is a try function that answers each address from errs (a
// missing address: a real dial), popping its errors in turn, and records
// the addresses tried.
type fakeTries struct {
	errs  map[string][]error
	tried []string
}

func (f *fakeTries) once(ctx context.Context, network, addr string) (net.Conn, error) {
	f.tried = append(f.tried, addr)
	if errs, ok := f.errs[addr]; ok && len(errs) > 0 {
		f.errs[addr] = errs[1:]
		return nil, errs[0]
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return lis
}

// Tries that time out (a peer that answers nothing) are followed by a new
// one, and the dial succeeds when a try does.
func TestDialTriesAgainWhileThePeerIsSilent(t *testing.T) {
	addr := listen(t, "tcp", "127.0.0.1:0").Addr().String()
	f := &fakeTries{errs: map[string][]error{addr: {timeoutErr{}, timeoutErr{}}}}
	c, err := dial(context.Background(), f.once, addr)
	if err != nil {
		t.Fatalf("dial after two silent tries: %v", err)
	}
	c.Close()
	if len(f.tried) != 3 {
		t.Errorf("tries: %v, want 3 (two silent, one answered)", f.tried)
	}
}

// A refusal ends the dial at once (gRPC's backoff paces the next), and so
// does the attempt's end.
func TestDialStopsAtARefusalOrTheAttemptsEnd(t *testing.T) {
	f := &fakeTries{errs: map[string][]error{"127.0.0.1:1": {refused, refused}}}
	if _, err := dial(context.Background(), f.once, "127.0.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused dial: err %v, want ECONNREFUSED", err)
	}
	if len(f.tried) != 1 {
		t.Errorf("tries after a refusal: %v, want 1", f.tried)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = &fakeTries{errs: map[string][]error{"127.0.0.1:1": {timeoutErr{}, timeoutErr{}}}}
	if _, err := dial(ctx, f.once, "127.0.0.1:1"); err == nil {
		t.Error("dial whose attempt ended: no error")
	}
	if len(f.tried) != 1 {
		t.Errorf("tries after the attempt ended: %v, want 1", f.tried)
	}
}

// A host name is resolved once, and its addresses are tried in turn: a
// silent first address does not keep the dial from the others, nor does
// a refusing one.
func TestDialTriesEachAddressOfAName(t *testing.T) {
	lookups := 0
	real := lookup
	lookup = func(context.Context, string) ([]string, error) {
		lookups++
		return []string{"10.255.255.1", "10.255.255.2", "127.0.0.1"}, nil
	}
	t.Cleanup(func() { lookup = real })
	silent, refusing, live := "10.255.255.1:7", "10.255.255.2:7", "127.0.0.1:7"
	listening := listen(t, "tcp", "127.0.0.1:0").Addr().String()
	f := &fakeTries{errs: map[string][]error{silent: {timeoutErr{}, timeoutErr{}}, refusing: {refused}, live: {timeoutErr{}}}}
	once := func(ctx context.Context, network, to string) (net.Conn, error) {
		c, err := f.once(ctx, network, map[bool]string{true: listening, false: to}[to == live && len(f.errs[live]) == 0])
		return c, err
	}
	c, err := dial(context.Background(), once, "shard.example:7")
	if err != nil {
		t.Fatalf("dial of a name whose third address answers: %v (tried %v)", err, f.tried)
	}
	c.Close()
	want := []string{silent, refusing, live, silent, listening}
	if lookups != 1 || !slices.Equal(f.tried, want) {
		t.Fatalf("%d lookups, tried %v; want 1, %v", lookups, f.tried, want)
	}
}

// A "unix:" address is a Unix socket, dialed once.
func TestDialUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcd.sock")
	listen(t, "unix", path)
	for _, addr := range []string{"unix:" + path, "unix://" + path} {
		f := &fakeTries{}
		c, err := dial(context.Background(), f.once, addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		c.Close()
		if len(f.tried) != 1 || f.tried[0] != path {
			t.Errorf("dial %s tried %v, want the path once", addr, f.tried)
		}
	}
}
