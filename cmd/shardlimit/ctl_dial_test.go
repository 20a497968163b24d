package main

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// ctlWithin runs ctl in this process and returns its error, failing the
// test if it has not returned after hang: a guard against a hang only, no
// test asserts how long a command took.
func ctlWithin(t *testing.T, hang time.Duration, args ...string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := runCtl(args...)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(hang):
		t.Fatalf("ctl %q has not returned after %v", args, hang)
		return nil
	}
}

// silentListener accepts connections and never answers, as a router
// stopped by SIGSTOP does (its kernel still completes TCP handshakes).
type silentListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newSilentListener(t *testing.T) *silentListener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentListener{Listener: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// accepted returns how many connections other than the test's own were
// made before now. A connection of the test's own goes behind every
// connection made so far (the accept queue is first in, first out), so
// once it is accepted, all of them are.
func (s *silentListener) accepted(t *testing.T) int {
	mine, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	n := 0
	poll.Until(t, 10*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, c := range s.conns {
			if c.RemoteAddr().String() == mine.LocalAddr().String() {
				n = i
				return nil
			}
		}
		return errors.New("the test's own connection is not accepted yet")
	})
	return n
}

// A router that accepts connections but answers nothing (stopped by
// SIGSTOP) is called that, in plain text and over TLS, and the command
// ends at its deadline: it makes no connection but the call's, and no
// diagnosis after the deadline.
func TestCtlSilentRouter(t *testing.T) {
	ca, err := creds.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	const timeout = time.Second
	for name, tlsArgs := range map[string][]string{"plain": nil, "tls": {"--tls-ca", caFile}} {
		t.Run(name, func(t *testing.T) {
			l := newSilentListener(t)
			addr := l.Addr().String()
			args := append([]string{"check", "--service", "s", "--endpoint", "/e", "--router", addr, "--timeout", timeout.String()}, tlsArgs...)
			err := ctlWithin(t, 30*time.Second, args...) // a hang guard
			want := "the router at " + addr + " accepted the connection but did not answer within 1s (--timeout)"
			if exitCode(err) != exitTimeout || !strings.HasPrefix(errorMessage(err), want) {
				t.Errorf("got %v (exit %d), want %s… (exit %d)", err, exitCode(err), want, exitTimeout)
			}
			if n := l.accepted(t); n != 1 {
				t.Errorf("%d connections, want the call's only", n)
			}
		})
	}
}

// A real TLS failure (a CA that did not sign the router's certificate, a
// name the certificate does not hold) is told apart from a silent router
// and names the TLS flags; plain text to a TLS router and an HTTP/1 port
// are each called what they are, naming --router.
func TestCtlDialFailures(t *testing.T) {
	dir := t.TempDir()
	ca, err := creds.NewCA("router-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := creds.NewCA("other-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, otherFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other.pem")
	for path, pem := range map[string][]byte{caFile: ca.CertPEM(), otherFile: other.CertPEM()} {
		if err := os.WriteFile(path, pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pair, err := ca.IssuePair(creds.Leaf{DNSNames: []string{"router.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Read(make([]byte, 1)) // until the client goes
			}()
		}
	}()
	tlsAddr := l.Addr().String()
	http1 := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(http1.Close)
	http1Addr := strings.TrimPrefix(http1.URL, "http://")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"another CA", []string{"--router", tlsAddr, "--tls-ca", otherFile}, exitUnavailable,
			[]string{"the TLS handshake with the router at " + tlsAddr + " failed", "certificate signed by unknown authority", "check --tls-ca"}},
		{"wrong name", []string{"--router", tlsAddr, "--tls-ca", caFile, "--tls-server-name", "elsewhere.test"}, exitUnavailable,
			[]string{"the TLS handshake with the router at " + tlsAddr + " failed", "elsewhere.test", "--tls-server-name"}},
		{"plain text to TLS", []string{"--router", tlsAddr}, exitUnavailable,
			[]string{"--router/SHARDLIMIT_ROUTER " + tlsAddr + " (from the command line): it accepts connections but does not speak plain-text gRPC"}},
		{"HTTP/1", []string{"--router", http1Addr}, exitUnavailable,
			[]string{"--router/SHARDLIMIT_ROUTER " + http1Addr + " (from the command line): it answers HTTP/1 (\"HTTP/1.1 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"members", "--timeout", "20s"}, tc.args...)
			err := ctlWithin(t, time.Minute, args...)
			msg := errorMessage(err)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s\nlacks %q", msg, w)
				}
			}
			if exitCode(err) != tc.code || strings.Contains(msg, "did not answer") {
				t.Errorf("exit %d, want %d: %s", exitCode(err), tc.code, msg)
			}
		})
	}
}
