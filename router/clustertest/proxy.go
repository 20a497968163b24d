package clustertest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a component, that a test
// can Pause: bytes stop flowing both ways, as when the process behind it is
// stopped (SIGSTOP), while connections stay open.
type Proxy struct {
	lis    net.Listener
	mu     sync.Mutex
	target string
	gate   chan struct{} // closed while bytes flow
	done   chan struct{} // closed when the test ends
	conns  []net.Conn
}

// NewProxy listens on a free port; SetTarget names where it forwards to.
func NewProxy(tb testing.TB) *Proxy {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{lis: lis, gate: make(chan struct{}), done: make(chan struct{})}
	close(p.gate)
	tb.Cleanup(func() {
		_ = lis.Close()
		close(p.done)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	go p.serve()
	return p
}

// Addr returns the proxy's address.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// SetTarget sets the address that new connections are forwarded to.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Pause stops forwarding bytes until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Resume forwards bytes again, the held ones first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// wait blocks while the proxy is paused; it reports false once the test
// ended.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	select {
	case <-g:
		return true
	case <-p.done:
		return false
	}
}

func (p *Proxy) serve() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, holding each read while the proxy is paused.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
