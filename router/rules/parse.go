package rules

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is the document format of a rules file.
type File struct {
	Rules []Rule `yaml:"rules"`
}

// ParseFile reads and parses a rules file; see Parse.
func ParseFile(path string) ([]Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse decodes a rules document, normalizes and validates every rule and
// checks that no two rules of a service share a name.
// On any problem it returns no rules and an error listing every problem as
// "file:line: field: message".
func Parse(file string, b []byte) ([]Rule, error) {
	var errs []error
	fail := func(line int, err error) { errs = append(errs, fmt.Errorf("%s:%d: %w", file, line, err)) }

	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var items []*yaml.Node
	if len(root.Content) > 0 {
		top := root.Content[0]
		if top.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: %w: the file must be a mapping with a rules: list", file, top.Line, ErrInvalid)
		}
		for k := 0; k+1 < len(top.Content); k += 2 {
			key, val := top.Content[k], top.Content[k+1]
			switch {
			case key.Value != "rules":
				fail(key.Line, fmt.Errorf("%w: %s: unknown field (want rules)", ErrInvalid, key.Value))
			case val.Kind != yaml.SequenceNode:
				fail(val.Line, fmt.Errorf("%w: rules: must be a list of rules", ErrInvalid))
			default:
				items = val.Content
			}
		}
	}
	out := make([]Rule, 0, len(items))
	byName := map[[2]string]int{}
	for _, n := range items {
		if n.Kind != yaml.MappingNode {
			fail(n.Line, fmt.Errorf("%w: rules: each rule must be a mapping", ErrInvalid))
			continue
		}
		lines := fieldLines(n)
		bad := false
		for k := 0; k+1 < len(n.Content); k += 2 {
			if key := n.Content[k]; !knownFields[key.Value] {
				fail(key.Line, fmt.Errorf("%w: %s: unknown field", ErrInvalid, key.Value))
				bad = true
			}
		}
		var r Rule
		if err := n.Decode(&r); err != nil {
			failDecode(fail, n.Line, err)
			continue
		}
		r.normalize()
		for _, err := range r.Validate() {
			fail(lineOf(err, lines, n.Line), err)
		}
		if prev, dup := byName[[2]string{r.Service, r.Name}]; dup {
			fail(lineOf(nil, lines, n.Line), fmt.Errorf("%w: name: service %q already has a rule named %q at line %d; rules of one service need distinct names", ErrInvalid, r.Service, r.Name, prev))
		}
		byName[[2]string{r.Service, r.Name}] = n.Line
		if !bad {
			out = append(out, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// knownFields are the YAML names of Rule's fields.
var knownFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[Rule]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		m[name] = true
	}
	return m
}()

// fieldLines maps each field of a rule's mapping to the line of its key.
func fieldLines(n *yaml.Node) map[string]int {
	out := map[string]int{}
	for k := 0; k+1 < len(n.Content); k += 2 {
		out[n.Content[k].Value] = n.Content[k].Line
	}
	return out
}

// lineOf returns the line of the field a validation error names ("field:
// ..." or "field[i]: ..." after the ErrInvalid prefix), else the rule's.
func lineOf(err error, lines map[string]int, rule int) int {
	if err == nil {
		return rule
	}
	msg := strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
	field, _, _ := strings.Cut(msg, ":")
	field, _, _ = strings.Cut(field, "[")
	if l, ok := lines[field]; ok {
		return l
	}
	return rule
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// failDecode reports each of yaml's type errors at its own line.
func failDecode(fail func(int, error), rule int, err error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		fail(rule, fmt.Errorf("%w: %v", ErrInvalid, err))
		return
	}
	for _, e := range te.Errors {
		if m := yamlLine.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			fail(line, fmt.Errorf("%w: %s", ErrInvalid, m[2]))
			continue
		}
		fail(rule, fmt.Errorf("%w: %s", ErrInvalid, e))
	}
}
