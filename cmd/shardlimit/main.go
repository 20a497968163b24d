package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

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
	root.AddCommand(shardCmd(), routerCmd(), rebalanceCmd(), devCmd(), ctlCmd())
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

func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
