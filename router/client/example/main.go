package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/client/httpmw"
	"github.com/shardlimit/shardlimit/shard/creds"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		routers  = flag.String("router", "127.0.0.1:8081", "router gRPC addresses, comma-separated")
		listen   = flag.String("listen", "127.0.0.1:8080", "HTTP listen address")
		service  = flag.String("service", "shop", "service named in every check")
		key      = flag.String("key", "user-header", "what names the counter: user-header, api-key-header or client-ip")
		header   = flag.String("header", "", "header read by user-header and api-key-header (default X-User-ID or X-API-Key)")
		trusted  = flag.String("trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is believed")
		timeout  = flag.Duration("timeout", 50*time.Millisecond, "bound on each check")
		failMode = flag.String("failure-mode", "open", "answer when no router answers in time: open or closed")
		window   = flag.Duration("batch-window", 0, "coalesce concurrent checks for this long into one RPC (0: off)")
		ca       = flag.String("tls-ca", "", "CA that verifies the routers (default: from $SHARDLIMIT_CONFIG)")
		name     = flag.String("tls-server-name", "", "name verified in the routers' certificate instead of the host dialed")
		token    = flag.String("token-file", "", "the service's bearer token, read again when the file changes (with -tls-ca)")
		insecure = flag.Bool("insecure", false, "call routers started with --insecure, in plain text")
	)
	flag.Parse()

	mode, err := client.ParseFailureMode(*failMode)
	if err != nil {
		return err
	}
	var ks httpmw.KeySource
	switch *key {
	case "user-header":
		ks = httpmw.KeyUserHeader
	case "api-key-header":
		ks = httpmw.KeyAPIKeyHeader
	case "client-ip":
		ks = httpmw.KeyClientIP
	default:
		return fmt.Errorf("-key %q is not user-header, api-key-header or client-ip", *key)
	}
	proxies, err := httpmw.ParsePrefixes(strings.Split(*trusted, ","))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	opts := client.Options{
		Routers:     strings.Split(*routers, ","),
		Timeout:     *timeout,
		FailureMode: mode,
		BatchWindow: *window,
		Insecure:    *insecure,
		Logger:      log,
	}
	// The service's own credentials: a token over TLS. Without them the
	// client reads the client config file of $SHARDLIMIT_CONFIG.
	if *ca != "" {
		if opts.TLS, err = creds.ClientTLS(creds.Files{CA: *ca}, *name); err != nil {
			return fmt.Errorf("-tls-ca: %w", err)
		}
	}
	if *token != "" {
		if opts.Token, err = client.TokenFile(*token); err != nil {
			return fmt.Errorf("-token-file: %w", err)
		}
	}
	c, err := client.New(opts)
	if err != nil {
		return err
	}
	defer c.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/checkout", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "checked out")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", r.URL.Path)
	})
	limit := httpmw.New(c, httpmw.Options{
		Service:        *service,
		Key:            ks,
		Header:         *header,
		TrustedProxies: proxies,
		Logger:         log,
	})
	srv := &http.Server{Addr: *listen, Handler: limit(mux), ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("example serving", "listen", *listen, "routers", *routers, "service", *service, "key", ks.String())
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
