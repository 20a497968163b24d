package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func main() {
	// Every persistent pre-run hook runs, the root's (log flags) first,
	// then ctl's (environment variables).
	cobra.EnableTraverseRunHooks = true
	root := &cobra.Command{
		Use:           "shardlimit",
		Short:         "A distributed API rate limiter: routers, shards holding counters in memory, etcd for membership and rules.",
		Version:       build().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate(build().text())
	root.PersistentFlags().StringVar(&logFormat, "log-format", logFormat, "log format: text or json")
	root.PersistentFlags().StringVar(&logLevel, "log-level", logLevel, "least severe log events written: "+strings.Join(logLevelNames, ", "))
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return checkLogFlags() }
	root.AddCommand(withEnv(shardCmd()), withEnv(routerCmd()), withEnv(rebalanceCmd()), withEnv(devCmd()), etcdCmd(), ctlCmd(), benchCmd(), versionCmd())
	requireSubcommand(root)
	ranCommand := markRun(root)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return
	}
	code := exitCode(err)
	if !*ranCommand {
		code = exitUsage // cobra rejected a flag, an argument or a command
	}
	if msg := errorMessage(err); msg != "" {
		fmt.Fprintln(os.Stderr, "shardlimit:", msg)
	}
	if code == exitUsage {
		fmt.Fprintf(os.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	stop()
	os.Exit(code)
}

// markRun wraps the RunE of every command under c so that the returned
// flag is set once a command runs: an error before that is cobra's, about
// the command line.
func markRun(c *cobra.Command) *bool {
	ran := new(bool)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				*ran = true
				return run(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(c)
	return ran
}

// processStart is when this process started: the start of a shard's host
// setup time.
var processStart = time.Now()

// logFormat and logLevel are the --log-format and --log-level flags.
var (
	logFormat = "text"
	logLevel  = "info"
)

// logLevels are the values of --log-level.
var (
	logLevels     = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	logLevelNames = []string{"debug", "info", "warn", "error"}
)

// checkLogFlags checks the values of --log-format and --log-level.
func checkLogFlags() error {
	if logFormat != "text" && logFormat != "json" {
		return usageErrorf("--log-format: %q is not text or json", logFormat)
	}
	if _, ok := logLevels[logLevel]; !ok {
		return usageErrorf("--log-level: %q is not one of %s", logLevel, strings.Join(logLevelNames, ", "))
	}
	return nil
}

// logger returns the components' logger: one line per event on stderr, at
// --log-level and above.
func logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[logLevel]}
	if logFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
