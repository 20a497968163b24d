package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// flagSpec is what `shardlimit <sub> --help` says of one flag.
type flagSpec struct {
	name string
	bool bool // takes no value
}

var (
	buildOnce sync.Once
	buildDir  string // removed by TestMain
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// shardlimitBinary builds ./cmd/shardlimit once per test binary.
func shardlimitBinary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build cmd/shardlimit")
	}
	buildOnce.Do(func() {
		// Not t.TempDir: the binary outlives the first test that asks.
		if buildDir, buildErr = os.MkdirTemp("", "shardlimit-deploy-test-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "shardlimit")
		out, err := exec.Command(gobin, "build", "-o", binPath, "../cmd/shardlimit").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/shardlimit: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// helpFlag matches a flag line of cobra's help: "  -o, --output string   ..."
// or "      --prune        ..." (a bool flag has no type).
var helpFlag = regexp.MustCompile(`^\s+(?:-(\w), )?--([a-zA-Z0-9][a-zA-Z0-9-]*)( \w+)?\s{2,}`)

// subcommandFlags parses the flags, local and global, of `shardlimit sub
// --help`.
func subcommandFlags(bin, sub string) (map[string]flagSpec, error) {
	out, err := exec.Command(bin, append(strings.Fields(sub), "--help")...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("shardlimit %s --help: %v\n%s", sub, err, out)
	}
	if !strings.Contains(string(out), "Usage:\n  shardlimit "+sub) {
		return nil, fmt.Errorf("shardlimit has no subcommand %q:\n%s", sub, out)
	}
	flags := map[string]flagSpec{}
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpFlag.FindStringSubmatch(line); m != nil {
			f := flagSpec{name: m[2], bool: m[3] == ""}
			flags[m[2]] = f
			if m[1] != "" {
				flags[m[1]] = f
			}
		}
	}
	return flags, nil
}

// Every flag that a manifest passes to shardlimit is a flag of that
// subcommand, in the --name=value form (--name alone for a bool flag), and
// none is passed twice.
func TestContainerFlagsExist(t *testing.T) {
	var invs []invocation
	seen := map[string]bool{}
	for _, dir := range kustomizations(t) {
		r := render(t, dir)
		for _, c := range shardlimitContainers(r.workloads()) {
			key := c.where + strings.Join(c.args, " ")
			if !seen[key] {
				seen[key] = true
				invs = append(invs, invocation{filepath.ToSlash(dir) + ": " + c.where, append([]string{c.sub}, c.args...)})
			}
		}
	}
	requireSubcommands(t, invs, "router", "shard", "rebalance")
	// $(VAR)s get values of the kind Kubernetes puts there.
	vars := strings.NewReplacer("$(POD_NAME)", "shardlimit-x-0", "$(POD_NAMESPACE)", "shardlimit",
		"$(POD_IP)", "10.0.0.1", "$(ETCD_ENDPOINTS)", "https://etcd-0:2379,https://etcd-1:2379")
	for _, err := range flagErrors(shardlimitBinary(t), invs, vars) {
		t.Error(err)
	}
}

// invocation is one shardlimit command line of a manifest or an example:
// the arguments after the binary, the subcommand's words first ("ctl",
// "rules", "apply"), then its flags.
type invocation struct {
	where string
	args  []string
}

// sub returns the subcommand: the words before the first flag.
func (inv invocation) sub() string {
	i := slices.IndexFunc(inv.args, func(a string) bool { return strings.HasPrefix(a, "-") })
	if i < 0 {
		i = len(inv.args)
	}
	return strings.Join(inv.args[:i], " ")
}

// flags returns the arguments after the subcommand.
func (inv invocation) flags() []string { return inv.args[len(strings.Fields(inv.sub())):] }

// requireSubcommands fails unless some invocation runs each of subs.
func requireSubcommands(t *testing.T, invs []invocation, subs ...string) {
	t.Helper()
	for _, want := range subs {
		if !slices.ContainsFunc(invs, func(inv invocation) bool { return inv.sub() == want }) {
			t.Errorf("nothing runs `shardlimit %s`", want)
		}
	}
}

// flagErrors checks invocations against the binary bin: every flag is a
// flag of the subcommand, in the --name=value form (--name alone for a
// bool flag), none is passed twice, and the values parse (cobra parses
// every flag before it answers --help) once vars has replaced the
// variables the runtime fills in.
func flagErrors(bin string, invs []invocation, vars *strings.Replacer) []error {
	var errs []error
	helps := map[string]map[string]flagSpec{}
	bad := map[string]bool{} // subcommands with an unknown flag: their values are not parsed
	for _, inv := range invs {
		sub := inv.sub()
		flags, ok := helps[sub]
		if !ok {
			var err error
			if flags, err = subcommandFlags(bin, sub); err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", inv.where, err))
			}
			helps[sub] = flags
		}
		if flags == nil {
			continue
		}
		passed := map[string]bool{}
		for _, a := range inv.flags() {
			name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") {
				errs = append(errs, fmt.Errorf("%s: argument %q is not --flag=value", inv.where, a))
				continue
			}
			if passed[name] {
				errs = append(errs, fmt.Errorf("%s: --%s passed twice", inv.where, name))
			}
			passed[name] = true
			f, ok := flags[name]
			switch {
			case !ok:
				bad[sub] = true
				errs = append(errs, fmt.Errorf("%s: --%s is not a flag of `shardlimit %s`", inv.where, name, sub))
			case !hasValue && !f.bool:
				errs = append(errs, fmt.Errorf("%s: --%s takes a value: pass --%s=value", inv.where, name, name))
			}
		}
	}
	for _, inv := range invs {
		if bad[inv.sub()] || helps[inv.sub()] == nil {
			continue
		}
		var args []string
		for _, a := range inv.args {
			args = append(args, vars.Replace(a))
		}
		if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s: the arguments do not parse: %v\n%s", inv.where, err, lastLine(out)))
		}
	}
	return errs
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// runbookCommands returns the `ctl ...` and `shardlimit ctl ...` commands of
// RUNBOOK.md, from its sh blocks and inline code, as argument lists after
// "ctl".
func runbookCommands(t *testing.T) [][]string {
	b, err := os.ReadFile("RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	var snippets []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			snippets = append(snippets, strings.SplitN(line, "#", 2)[0])
		default:
			for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(line, -1) {
				snippets = append(snippets, m[1])
			}
		}
	}
	var cmds [][]string
	split := regexp.MustCompile(`&&|\|\||[|;>]`)
	for _, sn := range snippets {
		for _, part := range split.Split(sn, -1) {
			f := strings.Fields(part)
			if len(f) > 1 && f[0] == "shardlimit" && f[1] == "ctl" {
				f = f[1:]
			}
			if len(f) > 1 && f[0] == "ctl" && !strings.HasPrefix(f[1], "'") {
				cmds = append(cmds, f[1:])
			}
		}
	}
	return cmds
}

// Every ctl command the runbook tells on-call to run exists, with the flags
// it shows.
func TestRunbookCommandsExist(t *testing.T) {
	cmds := runbookCommands(t)
	if len(cmds) < 10 {
		t.Fatalf("found only %d ctl commands in RUNBOOK.md", len(cmds))
	}
	bin := shardlimitBinary(t)
	for _, args := range cmds {
		var path, flags []string
		for _, a := range args {
			switch {
			case strings.HasPrefix(a, "-"):
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				flags = append(flags, name)
			case len(flags) == 0 && !strings.ContainsAny(a, "<>"):
				path = append(path, a)
			}
		}
		sub := "ctl " + strings.Join(path, " ")
		known, err := subcommandFlags(bin, sub)
		if err != nil {
			t.Errorf("RUNBOOK.md: ctl %s: %v", strings.Join(args, " "), err)
			continue
		}
		for _, f := range flags {
			if _, ok := known[f]; !ok {
				t.Errorf("RUNBOOK.md: ctl %s: -%s is not a flag of `shardlimit %s`", strings.Join(args, " "), f, sub)
			}
		}
	}
}
