package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

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

	// Strict pass: unknown fields and type errors, with yaml's own lines.
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var strict File
	if err := dec.Decode(&strict); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	// Second pass over nodes, for the line of each rule.
	var doc struct {
		Rules []yaml.Node `yaml:"rules"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out := make([]Rule, 0, len(doc.Rules))
	byName := map[[2]string]int{}
	for _, n := range doc.Rules {
		var r Rule
		if err := n.Decode(&r); err != nil {
			fail(n.Line, err)
			continue
		}
		r.normalize()
		for _, err := range r.Validate() {
			fail(n.Line, err)
		}
		if prev, dup := byName[[2]string{r.Service, r.Name}]; dup {
			fail(n.Line, fmt.Errorf("%w: name: service %q already has a rule named %q at line %d; rules of one service need distinct names", ErrInvalid, r.Service, r.Name, prev))
		}
		byName[[2]string{r.Service, r.Name}] = n.Line
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
