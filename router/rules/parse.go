package rules

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
// "file:line: field: message", sorted by line: each at the line of the
// field it names (the rule's line when the field is missing), and one bad
// field hides no other problem of its rule.
func Parse(file string, b []byte) ([]Rule, error) {
	var errs []lineError
	fail := func(line int, err error) { errs = append(errs, lineError{line, err}) }

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
		r, lines, undecoded := decodeRule(n, fail)
		r.normalize()
		for _, err := range r.Validate() {
			// A field that could not be decoded was reported as such; its
			// zero value says nothing more.
			if f := fieldOf(err); !undecoded[f] {
				fail(lineOf(f, lines, n.Line), err)
			}
		}
		if prev, dup := byName[[2]string{r.Service, r.Name}]; dup {
			fail(lineOf("name", lines, n.Line), fmt.Errorf("%w: name: service %q already has a rule named %q at line %d; rules of one service need distinct names", ErrInvalid, r.Service, r.Name, prev))
		}
		byName[[2]string{r.Service, r.Name}] = n.Line
		out = append(out, r)
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b lineError) int { return a.line - b.line })
		joined := make([]error, len(errs))
		for i, e := range errs {
			joined[i] = fmt.Errorf("%s:%d: %w", file, e.line, e.err)
		}
		return nil, errors.Join(joined...)
	}
	return out, nil
}

// lineError is a problem at a line of the file.
type lineError struct {
	line int
	err  error
}

// ruleFields maps the YAML name of each of Rule's fields to its index.
var ruleFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[Rule]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" && t.Field(i).IsExported() {
			m[name] = i // a key "" or an unexported field is no field
		}
	}
	return m
}()

// decodeRule decodes a rule's mapping one field at a time, so that a bad
// value hides no other field: it reports each unknown, repeated or
// undecodable field at its own line, and returns the line of each field's
// key and the fields it could not decode.
func decodeRule(n *yaml.Node, fail func(int, error)) (r Rule, lines map[string]int, undecoded map[string]bool) {
	lines, undecoded = map[string]int{}, map[string]bool{}
	v := reflect.ValueOf(&r).Elem()
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, val := n.Content[k], n.Content[k+1]
		name := key.Value
		i, known := ruleFields[name]
		if !known {
			fail(key.Line, fmt.Errorf("%w: %s: unknown field", ErrInvalid, name))
			continue
		}
		if first, dup := lines[name]; dup {
			fail(key.Line, fmt.Errorf("%w: %s: given twice (first at line %d)", ErrInvalid, name, first))
			continue
		}
		lines[name] = key.Line
		field := reflect.New(v.Field(i).Type())
		if err := val.Decode(field.Interface()); err != nil {
			undecoded[name] = true
			failDecode(fail, name, key.Line, err)
			continue
		}
		v.Field(i).Set(field.Elem())
	}
	return r, lines, undecoded
}

// fieldOf returns the field a validation error names ("field: ..." or
// "field[i]: ..." after the ErrInvalid prefix).
func fieldOf(err error) string {
	msg := strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
	field, _, _ := strings.Cut(msg, ":")
	field, _, _ = strings.Cut(field, "[")
	return field
}

// lineOf returns the line of a rule's field, else the rule's.
func lineOf(field string, lines map[string]int, rule int) int {
	if l, ok := lines[field]; ok {
		return l
	}
	return rule
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// failDecode reports a field's decoding error, naming the field: each of
// yaml's type errors at its own line (an element of a list, say), anything
// else (a bad duration) at the field's line.
func failDecode(fail func(int, error), field string, line int, err error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		fail(line, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err))
		return
	}
	for _, e := range te.Errors {
		l, msg := line, e
		if m := yamlLine.FindStringSubmatch(e); m != nil {
			l, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		fail(l, fmt.Errorf("%w: %s: %s", ErrInvalid, field, msg))
	}
}
