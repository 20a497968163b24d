package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"
)

func main() {
	root := &cobra.Command{
		Use:           "shardlimit",
		Short:         "A distributed API rate limiter: routers, shards holding counters in memory, etcd for membership and rules.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if logFormat != "text" && logFormat != "json" {
			return fmt.Errorf("log-format: %q is not text or json", logFormat)
		}
		return nil
	}
	root.AddCommand(shardCmd(), routerCmd(), rebalanceCmd(), devCmd(), ctlCmd(), benchCmd())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		if st, ok := status.FromError(err); ok {
			fmt.Fprintf(os.Stderr, "shardlimit: %v: %s\n", st.Code(), st.Message())
		} else {
			fmt.Fprintln(os.Stderr, "shardlimit:", err)
		}
		stop()
		os.Exit(1)
	}
}

// processStart is when this process started: the start of a shard's host
// setup time.
var processStart = time.Now()

// logFormat is the --log-format flag.
var logFormat = "text"

// logger returns the components' logger: one line per event on stderr.
func logger() *slog.Logger {
	if logFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
