package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serverCmds are the commands whose flags the environment sets.
var serverCmds = map[string]func() *cobra.Command{"router": routerCmd, "shard": shardCmd, "rebalance": rebalanceCmd, "dev": devCmd}

// parseWithEnv builds a server command, parses args and applies the
// environment as its pre-run does.
func parseWithEnv(t *testing.T, newCmd func() *cobra.Command, args ...string) (*pflag.FlagSet, error) {
	t.Helper()
	cmd := withEnv(newCmd())
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd.Flags(), cmd.PreRunE(cmd, nil)
}

// envValue is a valid value of a flag of type typ other than its
// default def.
func envValue(typ, def string) string {
	candidates := map[string][]string{
		"bool": {"true", "false"}, "int": {"7", "8"}, "uint32": {"7", "8"}, "float64": {"0.5", "0.25"},
		"duration": {"7s", "8s"}, "size": {"1GiB", "2GiB"}, "string": {"127.0.0.1:7", "127.0.0.1:8"}, "stringSlice": {"a:1,b:2"},
	}[typ]
	for _, v := range candidates {
		if v != def && "["+v+"]" != def && (typ != "duration" || v != strings.TrimSuffix(def, "0m0s")) {
			return v
		}
	}
	return ""
}

// Every flag of router, shard, rebalance and dev is set by its
// SHARDLIMIT_ variable, and --help says so, for the command and each flag.
func TestEnvSetsEveryServerFlag(t *testing.T) {
	for name, newCmd := range serverCmds {
		t.Run(name, func(t *testing.T) {
			cmd := withEnv(newCmd())
			if !strings.Contains(cmd.Long, "SHARDLIMIT_ and the flag's name") {
				t.Errorf("%s --help does not say that the environment sets its flags:\n%s", name, cmd.Long)
			}
			want := map[string]string{}
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if !strings.HasSuffix(f.Usage, "[$"+envName(f.Name)+"]") {
					t.Errorf("--%s: its help names no variable: %s", f.Name, f.Usage)
				}
				v := envValue(f.Value.Type(), f.DefValue)
				if v == "" {
					t.Fatalf("--%s: no test value for type %s", f.Name, f.Value.Type())
				}
				t.Setenv(envName(f.Name), v)
				want[f.Name] = v
			})
			fs, err := parseWithEnv(t, newCmd)
			if err != nil {
				t.Fatal(err)
			}
			for flag, v := range want {
				if got := fs.Lookup(flag).Value.String(); got == fs.Lookup(flag).DefValue {
					t.Errorf("%s=%s: --%s is still its default %s", envName(flag), v, flag, got)
				}
			}
		})
	}
}

// A flag on the command line wins over its variable; an empty variable
// is ignored; the log flags are read from the environment too.
func TestEnvPrecedence(t *testing.T) {
	t.Setenv("SHARDLIMIT_MAX_CONNECTIONS", "11")
	t.Setenv("SHARDLIMIT_PREFIX", "")
	t.Setenv("SHARDLIMIT_LOG_LEVEL", "warn")
	defer func() { logLevel = "info" }()
	root := &cobra.Command{Use: "shardlimit"}
	root.PersistentFlags().StringVar(&logLevel, "log-level", logLevel, "")
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "11"}, {[]string{"--max-connections", "12"}, "12"}} {
		cmd := withEnv(routerCmd())
		root.AddCommand(cmd)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := cmd.PreRunE(cmd, nil); err != nil {
			t.Fatal(err)
		}
		if got := cmd.Flags().Lookup("max-connections").Value.String(); got != tc.want {
			t.Errorf("SHARDLIMIT_MAX_CONNECTIONS=11, args %v: --max-connections %s, want %s", tc.args, got, tc.want)
		}
		if got := cmd.Flags().Lookup("prefix").Value.String(); got != "/shardlimit/" {
			t.Errorf("SHARDLIMIT_PREFIX empty: --prefix %q, want the default", got)
		}
		if logLevel != "warn" {
			t.Errorf("SHARDLIMIT_LOG_LEVEL=warn: log level %q", logLevel)
		}
		root.RemoveCommand(cmd)
	}
}

// An invalid value is refused naming the variable and saying it came
// from the environment, as a usage error; a later error about the field
// says which variable set it.
func TestEnvErrorsNameTheVariable(t *testing.T) {
	t.Setenv("SHARDLIMIT_MAX_CONNECTIONS", "x")
	t.Setenv("SHARDLIMIT_DEADLINE", "soon")
	_, err := parseWithEnv(t, routerCmd)
	for _, want := range []string{
		`invalid value "x" for SHARDLIMIT_MAX_CONNECTIONS (environment; --max-connections): `,
		`invalid value "soon" for SHARDLIMIT_DEADLINE (environment; --deadline): `,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q in it", err, want)
		}
	}
	if exitCode(err) != exitUsage {
		t.Errorf("exit code %d, want %d", exitCode(err), exitUsage)
	}

	src := flagSources{fromEnv: map[string]string{"max-connections": "-1", "max-queued": "0"}}
	for _, tc := range []struct{ err, want string }{
		{"max-connections: -1 not in 1..1000000", `max-connections: -1 not in 1..1000000 (SHARDLIMIT_MAX_CONNECTIONS="-1", from the environment)`},
		{"max queued: 0 not in 1..10000000", `max queued: 0 not in 1..10000000 (SHARDLIMIT_MAX_QUEUED="0", from the environment)`},
		{"--max-connections: bad", `--max-connections: bad (SHARDLIMIT_MAX_CONNECTIONS="-1", from the environment)`},
		{"deadline: 0s not in 1ms..10s", "deadline: 0s not in 1ms..10s"}, // set on the command line
		{"etcd unreachable", "etcd unreachable"},
	} {
		base := usageErrorf("%s", tc.err)
		got := src.annotate(base)
		if got.Error() != tc.want || !errors.Is(got, base) {
			t.Errorf("annotate(%q) = %q, want %q wrapping it", tc.err, got, tc.want)
		}
	}
}

// Without --listen the router listens on a fixed port: where ctl and
// dev look for it.
func TestRouterListensOnCtlsDefault(t *testing.T) {
	listen := routerCmd().Flags().Lookup("listen").DefValue
	if ctl := ctlCmd().PersistentFlags().Lookup("router").DefValue; listen != ctl || strings.HasSuffix(listen, ":0") {
		t.Errorf("router --listen defaults to %q, ctl --router to %q: want one fixed address", listen, ctl)
	}
	if dev := devCmd().Flags().Lookup("router-listen").DefValue; dev != listen {
		t.Errorf("dev --router-listen defaults to %q, router --listen to %q", dev, listen)
	}
}

// The binary reads the servers' flags from the environment: a bad value
// exits 2 naming its variable, before anything starts; --help says so.
func TestEnvErrorsOfTheBinary(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"SHARDLIMIT_MAX_CONNECTIONS=lots", []string{"router", "--etcd", "127.0.0.1:1", "--insecure"},
			`shardlimit: invalid value "lots" for SHARDLIMIT_MAX_CONNECTIONS (environment; --max-connections): `},
		{"SHARDLIMIT_SHARDS=80", []string{"dev"}, `shardlimit: shards: 80 not in 1..64 (SHARDLIMIT_SHARDS="80", from the environment)`},
		{"SHARDLIMIT_LOG_LEVEL=loud", []string{"shard", "--id", "s", "--etcd", "127.0.0.1:1", "--insecure"},
			`(SHARDLIMIT_LOG_LEVEL="loud", from the environment)`},
		{"SHARDLIMIT_INTERVAL=often", []string{"rebalance", "--etcd", "127.0.0.1:1", "--insecure"},
			`invalid value "often" for SHARDLIMIT_INTERVAL (environment; --interval)`},
	} {
		if r := run(t, bin, "", []string{tc.env}, tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s shardlimit %v: exit %d, want %d and %q:\n%s", tc.env, tc.args, r.code, exitUsage, tc.want, r.stderr)
		}
	}
	for name := range serverCmds {
		if r := run(t, bin, "", nil, name, "--help"); !strings.Contains(r.stdout, "SHARDLIMIT_MAX_CONNECTIONS") || !strings.Contains(r.stdout, "[$SHARDLIMIT_PREFIX]") {
			t.Errorf("%s --help does not name the variables:\n%s", name, r.stdout)
		}
	}
}
