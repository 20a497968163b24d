package handoff

import (
	"crypto/tls"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/rpc"
)

// Dialer keeps one connection per member address, for Options.Clients.
type Dialer struct {
	// TLS secures the calls (with a client certificate for mTLS); nil
	// dials in plain text.
	TLS *tls.Config
	// Options are further dial options (tracing's); default none.
	Options []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// Client returns the shard API client of m, dialing its address once.
func (d *Dialer) Client(m member.Member) (shardlimitv1.ShardClient, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.conns[m.Addr]; c != nil {
		return shardlimitv1.NewShardClient(c), nil
	}
	c, err := grpc.NewClient(m.Addr, append(rpc.DialOptions(d.TLS), d.Options...)...)
	if err != nil {
		return nil, fmt.Errorf("dial shard %s at %s: %w", m.ID, m.Addr, err)
	}
	if d.conns == nil {
		d.conns = map[string]*grpc.ClientConn{}
	}
	d.conns[m.Addr] = c
	return shardlimitv1.NewShardClient(c), nil
}

// Close closes every connection.
func (d *Dialer) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for addr, c := range d.conns {
		_ = c.Close()
		delete(d.conns, addr)
	}
}
