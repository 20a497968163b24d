package envoyconfig

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is one envoy ratelimit configuration file: a domain and its
// descriptor tree.
type Config struct {
	File        string
	Domain      string
	Line        int // of the domain
	Descriptors []*Descriptor
}

// Descriptor is one node of the tree.
type Descriptor struct {
	Key, Value     string
	RateLimit      *RateLimit // nil: a placeholder, or a whitelisted leaf
	ShadowMode     bool
	DetailedMetric bool
	// QuotaMode: over its limit, envoy ratelimit answers OK and reports
	// the descriptor in the response's dynamic metadata.
	QuotaMode bool
	// ValueToMetric names the metric by the request's value.
	ValueToMetric bool
	// ShareThreshold: the values a wildcard ("prefix*") matches share one
	// counter.
	ShareThreshold bool
	Descriptors    []*Descriptor
	Line           int
}

// RateLimit is a descriptor's rate_limit block.
type RateLimit struct {
	Unit            string // lower case; "" with Unlimited
	RequestsPerUnit uint32
	Unlimited       bool
	Name            string
	Replaces        []string
	Line            int
}

// ErrInvalid marks a configuration that envoy ratelimit would reject.
var ErrInvalid = errors.New("invalid envoy ratelimit config")

// Units are the units envoy ratelimit accepts, by name.
var Units = map[string]string{
	"second": "1s", "minute": "1m", "hour": "1h", "day": "1d",
	"week": "7d", "month": "30d", "year": "365d",
}

// ParseFile reads and parses one file; see Parse.
func ParseFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse parses one envoy ratelimit configuration file. Like envoy
// ratelimit, it rejects unknown keys, a descriptor without a key, a
// rate_limit without a known unit (or with one when unlimited), empty or
// self-naming replaces, share_threshold on a descriptor without a wildcard,
// and two descriptors of one level with the same key and value. Every
// problem is reported as "file:line: message". Keys that envoy ratelimit
// knows but the rules cannot express (quota_mode, value_to_metric,
// share_threshold, detailed_metric) are parsed, and Convert notes them.
func Parse(file string, b []byte) (*Config, error) {
	p := &parser{file: file}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", file, ErrInvalid, err)
	}
	c := &Config{File: file}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: %w: the file must be a mapping with domain and descriptors", file, ErrInvalid)
	}
	top := root.Content[0]
	c.Line = top.Line
	p.fields(top, func(key string, k, v *yaml.Node) {
		switch key {
		case "domain":
			c.Domain, c.Line = p.str(v), k.Line
		case "descriptors":
			c.Descriptors = p.descriptors(v)
		default:
			p.failf(k.Line, "unknown key %q (want domain, descriptors)", key)
		}
	})
	if c.Domain == "" {
		p.failf(c.Line, "domain: required")
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b lineError) int { return a.line - b.line })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e.err
		}
		return nil, errors.Join(errs...)
	}
	return c, nil
}

type parser struct {
	file string
	errs []lineError
}

type lineError struct {
	line int
	err  error
}

func (p *parser) failf(line int, format string, args ...any) {
	p.errs = append(p.errs, lineError{line, fmt.Errorf("%s:%d: %w: %s", p.file, line, ErrInvalid, fmt.Sprintf(format, args...))})
}

// fields calls f for each key of a mapping, reporting a repeated key.
func (p *parser) fields(n *yaml.Node, f func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.failf(n.Line, "want a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			p.failf(k.Line, "key %q given twice", k.Value)
			continue
		}
		seen[k.Value] = true
		f(k.Value, k, v)
	}
}

func (p *parser) str(v *yaml.Node) string {
	if v.Kind != yaml.ScalarNode {
		p.failf(v.Line, "want a string")
		return ""
	}
	return v.Value
}

func (p *parser) boolean(v *yaml.Node) bool {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
		p.failf(v.Line, "want true or false")
	}
	return b
}

func (p *parser) descriptors(v *yaml.Node) []*Descriptor {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.failf(v.Line, "descriptors: want a list")
		return nil
	}
	var out []*Descriptor
	seen := map[string]int{}
	for _, n := range v.Content {
		d := p.descriptor(n)
		if d == nil {
			continue
		}
		id := d.Key
		if d.Value != "" {
			id += "_" + d.Value
		}
		if first, dup := seen[id]; dup {
			p.failf(d.Line, "duplicate descriptor %q (first at line %d)", id, first)
			continue
		}
		seen[id] = d.Line
		out = append(out, d)
	}
	return out
}

func (p *parser) descriptor(n *yaml.Node) *Descriptor {
	if n.Kind != yaml.MappingNode {
		p.failf(n.Line, "descriptors: each descriptor must be a mapping")
		return nil
	}
	d := &Descriptor{Line: n.Line}
	p.fields(n, func(key string, k, v *yaml.Node) {
		switch key {
		case "key":
			d.Key = p.str(v)
		case "value":
			d.Value = p.str(v)
		case "rate_limit":
			d.RateLimit = p.rateLimit(k.Line, v)
		case "shadow_mode":
			d.ShadowMode = p.boolean(v)
		case "detailed_metric":
			d.DetailedMetric = p.boolean(v)
		case "quota_mode":
			d.QuotaMode = p.boolean(v)
		case "value_to_metric":
			d.ValueToMetric = p.boolean(v)
		case "share_threshold":
			d.ShareThreshold = p.boolean(v)
		case "descriptors":
			d.Descriptors = p.descriptors(v)
		default:
			p.failf(k.Line, "unknown key %q in a descriptor", key)
		}
	})
	if d.Key == "" {
		p.failf(d.Line, "descriptor has an empty key")
	}
	if d.ShareThreshold && !strings.HasSuffix(d.Key+d.Value, "*") {
		p.failf(d.Line, "share_threshold: only for a wildcard value (ending in '*'), not %s", entryString(d))
	}
	return d
}

func (p *parser) rateLimit(line int, v *yaml.Node) *RateLimit {
	r := &RateLimit{Line: line}
	p.fields(v, func(key string, k, v *yaml.Node) {
		switch key {
		case "unit":
			r.Unit = strings.ToLower(p.str(v))
		case "requests_per_unit":
			n, err := strconv.ParseUint(p.str(v), 10, 32)
			if err != nil {
				p.failf(v.Line, "requests_per_unit: %q is not a number in 0..4294967295", v.Value)
			}
			r.RequestsPerUnit = uint32(n)
		case "unlimited":
			r.Unlimited = p.boolean(v)
		case "name":
			r.Name = p.str(v)
		case "replaces":
			r.Replaces = p.replaces(v)
		default:
			p.failf(k.Line, "unknown key %q in a rate_limit", key)
		}
	})
	for _, n := range r.Replaces {
		if n == r.Name {
			p.failf(line, "replaces: should not contain the name of its own rate_limit (%q)", n)
		}
	}
	_, known := Units[r.Unit]
	switch {
	case r.Unlimited && known:
		p.failf(line, "rate_limit: should not specify a unit when unlimited")
	case !r.Unlimited && !known:
		p.failf(line, "rate_limit: invalid unit %q (want second, minute, hour, day, week, month or year)", r.Unit)
	}
	return r
}

func (p *parser) replaces(v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.failf(v.Line, "replaces: want a list of {name: ...}")
		return nil
	}
	var out []string
	for _, n := range v.Content {
		name := ""
		p.fields(n, func(key string, k, v *yaml.Node) {
			if key != "name" {
				p.failf(k.Line, "unknown key %q in replaces", key)
				return
			}
			name = p.str(v)
		})
		if name == "" {
			p.failf(n.Line, "replaces: should not have an empty name")
			continue
		}
		out = append(out, name)
	}
	return out
}
