package rules

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	yaml2 "go.yaml.in/yaml/v2"
)

// ErrSyntax marks a rules file that is not YAML.
var ErrSyntax = errors.New("YAML syntax")

// syntaxError reports yaml.v3's error for a document that is not YAML as
// "file:line: YAML syntax: problem", at the line of the token that broke
// it.
//
// yaml.v3 names the line where the enclosing block began, and for a parser
// error counts it from 0: a mis-indented key on line 5 of a list that
// starts on line 2 is "line 1: did not find expected '-' indicator".
// yaml.v2 is the same parser (both ports of libyaml) but names the line of
// the token itself, counted from 1 for a scanner error and from 0 for a
// parser error. So the line comes from v2, when it reports the same
// problem; else v3's message is kept as it is.
func syntaxError(file string, b []byte, v3err error) error {
	m := yamlError.FindStringSubmatch(v3err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w: %w", file, ErrSyntax, v3err)
	}
	problem := m[2]
	if line, ok := problemLine(b, problem); ok {
		return fmt.Errorf("%s:%d: %w: %s", file, line, ErrSyntax, problem)
	}
	return fmt.Errorf("%s: %w: %w", file, ErrSyntax, v3err)
}

// yamlError is both versions' "yaml: line N: problem" (v2 gives no line
// for a parser error on the first line).
var yamlError = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// problemLine returns the 1-based line of the token at which yaml.v2
// finds problem in b.
func problemLine(b []byte, problem string) (int, bool) {
	var v any
	err := yaml2.Unmarshal(b, &v)
	if err == nil {
		return 0, false
	}
	m := yamlError.FindStringSubmatch(err.Error())
	if m == nil || m[2] != problem {
		return 0, false
	}
	line := 0
	if m[1] != "" {
		line, _ = strconv.Atoi(m[1])
	}
	if parserProblems[problem] {
		line++ // counted from 0
	}
	return max(line, 1), true
}

// parserProblems are the problems libyaml's parser reports (parserc.go);
// every other problem is the scanner's.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}
