package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// admin calls the router's Admin API with the call timeout.
func (cf *ctlFlags) admin(cmd *cobra.Command, f func(context.Context, shardlimitv1.AdminClient) error) error {
	return cf.call(cmd, cf.timeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		return f(ctx, shardlimitv1.NewAdminClient(conn))
	})
}

// call dials the router and runs f, the whole within timeout: the dial,
// the handshake, the call and the explanation of a failure. When the
// router cannot be reached, or what answers is not a shardlimit router,
// the error says what is wrong, from what the connection did, naming the
// flag and variable that set the address.
func (cf *ctlFlags) call(cmd *cobra.Command, timeout time.Duration, f func(context.Context, *grpc.ClientConn) error) error {
	if err := checkRouterAddr(cf.router); err != nil {
		return usageErrorf("%s: %v", cf.source("router", cf.router), err)
	}
	cfg, err := cf.tls.client()
	if err != nil {
		return withCode(exitUsage, err)
	}
	trace := &dialTrace{}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(trace.creds(cfg))}
	token, err := cf.token()
	if err != nil {
		return withCode(exitUsage, err)
	}
	if token != nil {
		if cfg == nil {
			return usageErrorf("a bearer token is sent over TLS only: give the router's CA with --tls-ca (or %s)", envName("tls-ca"))
		}
		opts = append(opts, grpc.WithPerRPCCredentials(creds.PerRPC(token)))
	}
	conn, err := grpc.NewClient(cf.router, opts...)
	if err != nil {
		return usageErrorf("%s: %v", cf.source("router", cf.router), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	err = f(ctx, conn)
	if err == nil {
		return nil
	}
	return cf.explain(ctx, timeout, conn, trace.state(), err)
}

// token returns the bearer token to call with: from --token-file, else
// from SHARDLIMIT_TOKEN; nil when neither is set.
func (cf *ctlFlags) token() (creds.TokenFunc, error) {
	if cf.tokenFile != "" {
		t, err := creds.NewTokenFile(cf.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cf.source("token-file", cf.tokenFile), err)
		}
		return t.Token, nil
	}
	if t := strings.TrimSpace(os.Getenv(envToken)); t != "" {
		return creds.StaticToken(t), nil
	}
	return nil, nil
}

// hasScheme reports whether addr names a gRPC scheme ("dns:///host:port",
// "unix:///path") rather than being host:port.
func hasScheme(addr string) bool {
	return strings.Contains(addr, ":///") || strings.HasPrefix(addr, "unix:")
}

// checkRouterAddr accepts host:port, and any address with a gRPC scheme
// ("dns:///host:port", "unix:///path").
func checkRouterAddr(addr string) error {
	if hasScheme(addr) {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return fmt.Errorf("not host:port: %v", err)
	case host == "":
		return errors.New("no host")
	case port == "":
		return errors.New("no port")
	}
	return nil
}

// explain turns a failed call's error into one that says what is wrong
// with --router, when the failure is the connection's and not an answer of
// the router. ctx is the command's: explain connects again only to find
// why no connection was made, and only while ctx lasts.
func (cf *ctlFlags) explain(ctx context.Context, timeout time.Duration, conn *grpc.ClientConn, s dialState, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	where := cf.source("router", cf.router)
	switch {
	case st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "unknown service"):
		return withCode(exitUnavailable, fmt.Errorf("%s: it serves gRPC, but not the router's API (%s): is it another component's address (a shard, the rebalance job, etcd)? Give the router's --listen address", where, st.Message()))
	case st.Code() != codes.Unavailable && st.Code() != codes.DeadlineExceeded:
		return err
	case conn.GetState() == connectivity.Ready:
		return err // the router answered Unavailable (a shard, etcd) or was late
	}
	code := exitUnavailable
	if st.Code() == codes.DeadlineExceeded {
		code = exitTimeout
	}
	if s.connected {
		return withCode(code, errors.New(cf.dialFailure(s, timeout, st.Code() == codes.DeadlineExceeded)))
	}
	why := ""
	if ctx.Err() == nil {
		why = cf.unreachable(ctx)
	} else {
		why = fmt.Sprintf("no connection within %v (--timeout): is the host up, and the port open to this machine?", timeout)
	}
	if why == "" {
		why = "no answer: " + st.Message()
	}
	return withCode(code, fmt.Errorf("%s: %s", where, why))
}

// dialFailure says why a call failed on a connection that was made, from
// what the router sent on it (s); late is whether the deadline (timeout)
// passed. Where the address may be wrong, the message names the flag and
// variable that set it.
func (cf *ctlFlags) dialFailure(s dialState, timeout time.Duration, late bool) string {
	where := cf.source("router", cf.router)
	tlsFlags := fmt.Sprintf("check --tls-ca, --tls-cert, --tls-key and --tls-server-name (or %s and the other SHARDLIMIT_TLS_ variables)", envName("tls-ca"))
	switch {
	case s.read == 0 && late:
		return fmt.Sprintf("the router at %s accepted the connection but did not answer within %v (--timeout): is it stopped, hung or overloaded?", cf.router, timeout)
	case looksLikeHTTP1(s.first):
		return fmt.Sprintf("%s: it answers HTTP/1 (%q), not gRPC: is it a metrics port? Give the router's gRPC address (its --listen; dev: --router-listen, default 127.0.0.1:8081)", where, firstLine(s.first))
	case cf.tls.ca == "" && cf.tls.cert == "":
		return fmt.Sprintf("%s: it accepts connections but does not speak plain-text gRPC: if the router serves TLS, give its CA and your credentials with --tls-ca and --tls-cert/--tls-key or --token-file (or %s, or %s naming a client config file, as 'shardlimit dev' prints)", where, envName("tls-ca"), creds.EnvConfig)
	case s.read == 0:
		return fmt.Sprintf("%s: it accepted the connection and closed it without answering: is it at its connection limit, or not a gRPC server?", where)
	case s.err != nil:
		return fmt.Sprintf("the TLS handshake with the router at %s failed: %v: %s", cf.router, s.err, tlsFlags)
	}
	return fmt.Sprintf("the router at %s completed the TLS handshake, then closed the connection (did it refuse this client's certificate?): %s", cf.router, tlsFlags)
}

// firstLine is the first line of what a server sent first.
func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// looksLikeHTTP1 reports whether what a server sent first is an HTTP/1
// status line.
func looksLikeHTTP1(first []byte) bool { return strings.HasPrefix(string(first), "HTTP/1.") }

// unreachable finds out why no connection to the router address was made:
// a host that does not resolve, or a port nothing listens on. It returns
// "" when it finds nothing wrong.
func (cf *ctlFlags) unreachable(ctx context.Context) string {
	host, _, err := net.SplitHostPort(cf.router)
	if err != nil || hasScheme(cf.router) {
		return "" // gRPC's own message says more
	}
	if net.ParseIP(host) == nil {
		if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
			return fmt.Sprintf("cannot resolve host %q: %v", host, err)
		}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", cf.router)
	if err != nil {
		return fmt.Sprintf("cannot connect: %v", err)
	}
	c.Close()
	return ""
}
