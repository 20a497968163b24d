package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The servers (router, shard, rebalance and dev) take every flag from the
// environment too, as SHARDLIMIT_ and the flag's name in upper snake case
// (envName: --max-connections as SHARDLIMIT_MAX_CONNECTIONS), as gubernator
// does with GUBER_ and ctl with its global flags. A flag on the command
// line wins over its variable; an empty variable is ignored.

// envHelp is the paragraph of a server's --help about the environment.
const envHelp = `Environment: every flag, --log-format and --log-level too, can be set as a
variable: SHARDLIMIT_ and the flag's name in upper case with dashes as
underscores (--max-connections as SHARDLIMIT_MAX_CONNECTIONS, as each flag
below shows). A flag on the command line wins over its variable; an empty
variable is ignored. An invalid value is refused naming the variable.`

// withEnv makes cmd take its flags, and the inherited --log-format and
// --log-level, from the environment before it runs, says so in its help
// and in each flag's, and adds to an error of its run about a field set
// from the environment which variable set it. It returns cmd.
func withEnv(cmd *cobra.Command) *cobra.Command {
	cmd.Long = cmp.Or(cmd.Long, cmd.Short) + "\n\n" + envHelp
	cmd.Flags().VisitAll(func(f *pflag.Flag) { f.Usage += " [$" + envName(f.Name) + "]" })
	var src flagSources
	cmd.PreRunE = func(c *cobra.Command, _ []string) (err error) {
		if src, err = applyEnv(c.Flags(), nil); err != nil {
			return err
		}
		return src.annotate(checkLogFlags()) // the root checked them before the environment applied
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error { return src.annotate(run(c, args)) }
	return cmd
}

// flagSources says, for each flag that was set, where its value came
// from: the command line or the environment.
type flagSources struct{ fromEnv map[string]string } // flag name → its variable's value

// applyEnv sets each flag of fs (those only accepts, when only is not nil)
// that the command line left unset from its variable, if that is set and
// not empty. An invalid value is a usage error naming the variable and the
// flag.
func applyEnv(fs *pflag.FlagSet, only func(*pflag.Flag) bool) (flagSources, error) {
	src := flagSources{fromEnv: map[string]string{}}
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		v := os.Getenv(envName(f.Name))
		if f.Changed || v == "" || f.Name == "help" || (only != nil && !only(f)) {
			return
		}
		// As fs.Set, whose error would name the flag as if it were on the
		// command line.
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Sprintf("invalid value %q for %s (environment; --%s): %v", v, envName(f.Name), f.Name, err))
			return
		}
		f.Changed = true
		src.fromEnv[f.Name] = v
	})
	if len(errs) > 0 {
		return src, usageErrorf("%s", strings.Join(errs, "; "))
	}
	return src, nil
}

// annotate adds to an error about a field (the text before its first
// colon, in the flag's words: "max-connections: ..." or "max queued: ...")
// that the field's flag was set from the environment, and by which
// variable; other errors are returned as they are.
func (s flagSources) annotate(err error) error {
	if err == nil || len(s.fromEnv) == 0 {
		return err
	}
	field, _, ok := strings.Cut(err.Error(), ":")
	if !ok {
		return err
	}
	name := strings.TrimPrefix(strings.ReplaceAll(strings.TrimSpace(field), " ", "-"), "--")
	v, ok := s.fromEnv[name]
	if !ok {
		return err
	}
	return fmt.Errorf("%w (%s=%q, from the environment)", err, envName(name), v)
}
