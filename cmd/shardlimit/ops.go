package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsServer serves a component's /metrics, /healthz and /readyz.
type opsServer struct{ srv *http.Server }

// pprofHelp is the help of every component's --pprof flag.
const pprofHelp = "also serve Go's profiles at /debug/pprof/ on --metrics-listen (CPU, heap, goroutines; for benchmarks and debugging, default: off)"

// serveOps serves the operational endpoints on addr; "" serves nothing.
// /healthz answers 200 while the process runs; /readyz answers 200 when
// ready returns nil, else 503 with the reason. With profiles, it serves
// net/http/pprof's /debug/pprof/ too.
func serveOps(addr string, profiles bool, reg *prometheus.Registry, ready func() error) (*opsServer, error) {
	if addr == "" {
		return &opsServer{}, nil
	}
	mux := http.NewServeMux()
	if profiles {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return &opsServer{srv: srv}, nil
}

func (o *opsServer) close() {
	if o.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = o.srv.Shutdown(ctx)
}
