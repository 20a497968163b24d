package rules

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/shard/limiter"
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
func Parse(file string, b []byte) ([]Rule, error) { return parse(file, b, false) }

// ParseStored is Parse for rules read back from etcd: it drops, instead of
// refusing, a field that the rule's algorithm ignores and that an older
// version stored (burst on a window algorithm), so that such a rule keeps
// limiting as it did.
func ParseStored(file string, b []byte) ([]Rule, error) { return parse(file, b, true) }

func parse(file string, b []byte, stored bool) ([]Rule, error) {
	var errs []lineError
	fail := func(line int, err error) { errs = append(errs, lineError{line, err}) }

	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, syntaxError(file, b, err)
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
				fail(key.Line, fmt.Errorf("%w: unknown field %s (want rules)", ErrInvalid, quoteField(key.Value)))
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
		r, lines, undecoded, meant := decodeRule(n, fail)
		if stored {
			r.dropIgnored()
		}
		r.normalize()
		for _, err := range r.Validate() {
			f := fieldOf(err)
			_, given := lines[f]
			switch {
			case undecoded[f]:
				// A field that could not be decoded was reported as such;
				// its zero value says nothing more.
			case !given && meant[f]:
				// Missing because its name was mistyped: the unknown field
				// that names it was reported, with this name.
			case meant["algorithm"] && lines["algorithm"] == 0 && errors.Is(err, limiter.ErrNotApplicable):
				// A field refused for the default algorithm, when the
				// algorithm's own name was mistyped.
			case !given && required[f] != "":
				fail(n.Line, fmt.Errorf("%w: %s: required: %s", ErrInvalid, f, required[f]))
			default:
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

// required describes the fields a counted rule cannot do without, which
// Validate reports by their zero value when left out.
var required = map[string]string{
	"limit":  fmt.Sprintf("the hits allowed per period, 1..%d", limiter.MaxLimit),
	"period": fmt.Sprintf("a duration like 1s, 1m or 1d, %v..%v", limiter.MinPeriod, Duration(limiter.MaxPeriod)),
}

// decodeRule decodes a rule's mapping one field at a time, so that a bad
// value hides no other field: it reports each unknown, repeated or
// undecodable field at its own line, and returns the line of each field's
// key, the fields it could not decode, and the fields that unknown ones
// look like mistypings of.
func decodeRule(n *yaml.Node, fail func(int, error)) (r Rule, lines map[string]int, undecoded, meant map[string]bool) {
	lines, undecoded, meant = map[string]int{}, map[string]bool{}, map[string]bool{}
	v := reflect.ValueOf(&r).Elem()
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, val := n.Content[k], n.Content[k+1]
		name := key.Value
		i, known := ruleFields[name]
		if !known {
			err := fmt.Errorf("%w: unknown field %s", ErrInvalid, quoteField(name))
			if like := closestField(name); like != "" {
				meant[like] = true
				err = fmt.Errorf("%w; did you mean `%s`?", err, like)
			}
			fail(key.Line, err)
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
	return r, lines, undecoded, meant
}

// quoteField writes a field's name in backquotes, or in double quotes with
// escapes when it holds a newline or another control character, so that
// an error stays on its line.
func quoteField(name string) string {
	if strconv.CanBackquote(name) {
		return "`" + name + "`"
	}
	return strconv.Quote(name)
}

// closestField returns the field whose name is nearest name, within two
// edits (an insertion, deletion, substitution or swap of neighbours each),
// or "" when none is that near. Ties go to the first in sorted order.
func closestField(name string) string {
	best, bestD := "", 3
	for _, f := range slices.Sorted(maps.Keys(ruleFields)) {
		if d := editDistance(name, f); d < bestD {
			best, bestD = f, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// by bytes.
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
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
		e = strings.ReplaceAll(e, "\n", `\n`) // a value it quotes stays on the error's line
		l, msg := line, e
		if m := yamlLine.FindStringSubmatch(e); m != nil {
			l, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		fail(l, fmt.Errorf("%w: %s: %s", ErrInvalid, field, msg))
	}
}
