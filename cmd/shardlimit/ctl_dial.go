package main

import (
	"bufio"
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
	"github.com/shardlimit/shardlimit/shard/rpc"
)

// admin calls the router's Admin API with the call timeout.
func (cf *ctlFlags) admin(cmd *cobra.Command, f func(context.Context, shardlimitv1.AdminClient) error) error {
	return cf.call(cmd, cf.timeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		return f(ctx, shardlimitv1.NewAdminClient(conn))
	})
}

// call dials the router and runs f within timeout. When the router cannot
// be reached, or what answers is not a shardlimit router, the error says
// what is wrong with the address and names the flag and variable that set
// it.
func (cf *ctlFlags) call(cmd *cobra.Command, timeout time.Duration, f func(context.Context, *grpc.ClientConn) error) error {
	if err := checkRouterAddr(cf.router); err != nil {
		return usageErrorf("%s: %v", cf.source("router", cf.router), err)
	}
	cfg, err := cf.tls.client()
	if err != nil {
		return withCode(exitUsage, err)
	}
	opts := []grpc.DialOption{rpc.DialCreds(cfg)}
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
	return cf.explain(cmd.Context(), conn, err)
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

// checkRouterAddr accepts host:port, and any address with a gRPC scheme
// ("dns:///host:port", "unix:///path").
func checkRouterAddr(addr string) error {
	if strings.Contains(addr, ":///") || strings.HasPrefix(addr, "unix:") {
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
// the router.
func (cf *ctlFlags) explain(ctx context.Context, conn *grpc.ClientConn, err error) error {
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
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	why := cf.diagnose(ctx)
	if why == "" {
		why = "no answer: " + st.Message()
	}
	code := exitUnavailable
	if st.Code() == codes.DeadlineExceeded {
		code = exitTimeout
	}
	return withCode(code, fmt.Errorf("%s: %s", where, why))
}

// diagnose finds out why the router address cannot be called: a host that
// does not resolve, a port nothing listens on, or something that is not
// gRPC (a metrics port answers HTTP/1). It returns "" when it finds
// nothing wrong.
func (cf *ctlFlags) diagnose(ctx context.Context) string {
	host, _, err := net.SplitHostPort(cf.router)
	if err != nil {
		return "" // a scheme address: gRPC's own message says more
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
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "HEAD / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host); err == nil {
		line, _ := bufio.NewReader(c).ReadString('\n')
		if strings.HasPrefix(line, "HTTP/1.") {
			return fmt.Sprintf("it answers HTTP/1 (%q), not gRPC: is it a metrics port? Give the router's gRPC address (its --listen; dev: --router-listen, default 127.0.0.1:8081)", strings.TrimSpace(line))
		}
	}
	if cf.tls.ca == "" && cf.tls.cert == "" {
		return fmt.Sprintf("it accepts connections but does not speak plain-text gRPC: if the router serves TLS, give its CA and your credentials with --tls-ca and --tls-cert/--tls-key or --token-file (or %s, or %s naming a client config file, as 'shardlimit dev' prints)", envName("tls-ca"), creds.EnvConfig)
	}
	return "it accepts connections but the TLS handshake or gRPC failed: check --tls-ca, --tls-cert, --tls-key and --tls-server-name (or their SHARDLIMIT_ variables)"
}
