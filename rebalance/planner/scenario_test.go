package planner

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// The scenario files follow etcd raft's testdata style: a file is a series
// of cases, each a command line, its input lines, "----", and the expected
// output up to the next blank line. Lines starting with # between cases are
// comments. The cases of a file run in order on one state:
//
//	members                      input: "ID ready" or "ID unready" per line;
//	                             replaces the live members
//	partitions                   input: "OWNER LOAD..." per line, partitions
//	                             numbered in order; OWNER "-" is no owner
//	plan [threshold=X] [max-moves=N]
//	                             computes and renders a plan
//	apply                        gives the last plan's partitions to their
//	                             new owners
//
// go test ./rebalance/planner/ -rewrite regenerates the expected outputs.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScenario(t, file) })
	}
}

type scenarioCase struct {
	line     int // of the command, 1-based
	command  string
	args     []string
	input    []string
	out      [2]int // expected output lines [from, to) of the file
	expected string
}

func parseScenario(lines []string) ([]scenarioCase, error) {
	var cases []scenarioCase
	for i := 0; i < len(lines); {
		if l := strings.TrimSpace(lines[i]); l == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		fields := strings.Fields(lines[i])
		c := scenarioCase{line: i + 1, command: fields[0], args: fields[1:]}
		for i++; ; i++ {
			if i == len(lines) {
				return nil, fmt.Errorf("line %d: %s: no ---- line", c.line, c.command)
			}
			if lines[i] == "----" {
				break
			}
			c.input = append(c.input, lines[i])
		}
		i++
		c.out[0] = i
		for i < len(lines) && lines[i] != "" {
			i++
		}
		c.out[1] = i
		c.expected = strings.Join(lines[c.out[0]:c.out[1]], "\n")
		cases = append(cases, c)
	}
	return cases, nil
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	cases, err := parseScenario(lines)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var s scenario
	outputs := make([]string, len(cases))
	for k, c := range cases {
		got, err := s.do(c)
		if err != nil {
			t.Fatalf("%s:%d: %v", file, c.line, err)
		}
		outputs[k] = strings.TrimRight(got, "\n")
		if !*rewrite && outputs[k] != c.expected {
			t.Errorf("%s:%d: %s %s\n--- want\n%s\n--- got\n%s", file, c.line, c.command,
				strings.Join(c.args, " "), c.expected, outputs[k])
		}
	}
	if !*rewrite {
		return
	}
	for k := len(cases) - 1; k >= 0; k-- {
		var out []string
		if outputs[k] != "" {
			out = strings.Split(outputs[k], "\n")
		}
		lines = slices.Replace(lines, cases[k].out[0], cases[k].out[1], out...)
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scenario is the state a scenario file builds up.
type scenario struct {
	in   Input
	last *Plan
}

func (s *scenario) do(c scenarioCase) (string, error) {
	switch c.command {
	case "members":
		s.in.Members = nil
		for _, l := range c.input {
			f := strings.Fields(l)
			if len(f) != 2 || (f[1] != "ready" && f[1] != "unready") {
				return "", fmt.Errorf("members: %q is not \"ID ready|unready\"", l)
			}
			s.in.Members = append(s.in.Members, Member{ID: f[0], Ready: f[1] == "ready"})
		}
		return s.renderMembers(), nil
	case "partitions":
		s.in.Owners, s.in.Load = nil, nil
		for _, l := range c.input {
			f := strings.Fields(l)
			if len(f) < 2 {
				return "", fmt.Errorf("partitions: %q is not \"OWNER LOAD...\"", l)
			}
			owner := f[0]
			if owner == "-" {
				owner = ""
			}
			for _, v := range f[1:] {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return "", fmt.Errorf("partitions: %v", err)
				}
				s.in.Owners = append(s.in.Owners, owner)
				s.in.Load = append(s.in.Load, n)
			}
		}
		return s.renderOwners(), nil
	case "plan":
		var opts Options
		for _, a := range c.args {
			k, v, _ := strings.Cut(a, "=")
			var err error
			switch k {
			case "threshold":
				opts.Threshold, err = strconv.ParseFloat(v, 64)
			case "max-moves":
				opts.MaxMoves, err = strconv.Atoi(v)
			default:
				err = fmt.Errorf("unknown argument %q", a)
			}
			if err != nil {
				return "", fmt.Errorf("plan: %v", err)
			}
		}
		p, err := Compute(s.in, opts)
		if err != nil {
			s.last = nil
			return "error: " + err.Error(), nil
		}
		s.last = &p
		return p.String(), nil
	case "apply":
		if s.last == nil {
			return "", fmt.Errorf("apply: no plan")
		}
		s.in.Owners = apply(s.in.Owners, s.last.Moves)
		return s.renderOwners(), nil
	}
	return "", fmt.Errorf("unknown command %q", c.command)
}

// apply returns owners with moves applied.
func apply(owners []string, moves []Move) []string {
	out := slices.Clone(owners)
	for _, m := range moves {
		out[m.Partition] = m.To
	}
	return out
}

func (s *scenario) renderMembers() string {
	var b strings.Builder
	b.WriteString("members:")
	for _, m := range s.in.Members {
		b.WriteString(" " + m.ID)
		if !m.Ready {
			b.WriteString("(unready)")
		}
	}
	return b.String()
}

// renderOwners lists each owner's partitions as partition=load, owners
// sorted, "-" for no owner.
func (s *scenario) renderOwners() string {
	byOwner := map[string][]string{}
	for p, o := range s.in.Owners {
		if o == "" {
			o = "-"
		}
		byOwner[o] = append(byOwner[o], fmt.Sprintf("%d=%d", p, s.in.Load[p]))
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	var b strings.Builder
	for _, o := range owners {
		fmt.Fprintf(&b, "%s: %s\n", o, strings.Join(byOwner[o], " "))
	}
	return b.String()
}
