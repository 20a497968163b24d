package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is a grants file: the grants a component holds besides those in
// etcd (--grants-file), typically the internal identities and a first
// operator, so that a new cluster can be called before any grant is
// stored.
type File struct {
	Grants []Grant `yaml:"grants" json:"grants"`
}

// ParseFile reads and validates a grants file.
func ParseFile(path string) ([]Grant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse parses and validates a grants file named name, reporting every
// problem as name: grants[i].field: message. Unknown keys and an id listed
// twice are errors.
func Parse(name string, b []byte) ([]Grant, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrInvalidGrant, err)
	}
	var errs []string
	seen := map[string]int{}
	for i := range f.Grants {
		g := &f.Grants[i]
		if err := g.Validate(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: grants[%d]: %s", name, i, strings.TrimPrefix(err.Error(), ErrInvalidGrant.Error()+": ")))
		}
		if j, dup := seen[g.ID]; dup && g.ID != "" {
			errs = append(errs, fmt.Sprintf("%s: grants[%d].id: %q is granted already by grants[%d]", name, i, g.ID, j))
		}
		seen[g.ID] = i
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w:\n%s", ErrInvalidGrant, strings.Join(errs, "\n"))
	}
	return f.Grants, nil
}

// Decode parses and validates one grant as stored (YAML); unknown keys
// are errors.
func Decode(b []byte) (Grant, error) {
	var g Grant
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&g); err != nil {
		return Grant{}, fmt.Errorf("%w: %v", ErrInvalidGrant, err)
	}
	return g, g.Validate()
}

// Encode returns the stored form of a grant: its YAML.
func Encode(g Grant) ([]byte, error) { return yaml.Marshal(g) }
