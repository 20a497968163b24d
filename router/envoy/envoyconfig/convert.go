package envoyconfig

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shardlimit/shardlimit/router/rules"
)

// Options configure Convert.
type Options struct {
	// Algorithm of the converted rules; default fixed_window, the
	// algorithm envoy ratelimit counts with.
	Algorithm string
	// AllowRequestOverride sets allow_request_override on every counted
	// rule, so that a descriptor's own limit (Envoy's
	// RateLimitDescriptor.limit) replaces the rule's, as envoy ratelimit
	// always lets it; default false: a caller must not raise its own limit.
	AllowRequestOverride bool
}

// Note is something to know about an item of the configuration, at its
// line: something the rules cannot express (Lossy), or a rule added to
// keep envoy ratelimit's answer.
type Note struct {
	File    string
	Line    int
	Message string
	// Lossy: the rules do not do what the item does.
	Lossy bool
}

func (n Note) String() string {
	kind := "note"
	if n.Lossy {
		kind = "cannot express"
	}
	return fmt.Sprintf("%s:%d: %s: %s", n.File, n.Line, kind, n.Message)
}

// Origin is where a converted rule comes from.
type Origin struct {
	File string
	Line int
	// Descriptor is the node the rule comes from.
	Descriptor *Descriptor
	// Added: an unlimited rule added where envoy ratelimit answers
	// without a limit (see check), not the node's rate_limit.
	Added bool
}

// Result is the outcome of Convert: the rules, each with its origin at the
// same index, and the notes, sorted by file and line.
type Result struct {
	Rules   []rules.Rule
	Origins []Origin
	Notes   []Note
}

// Convert converts configurations into rules. Configurations of one domain
// (several files) are merged, as envoy ratelimit's MERGE_DOMAIN_CONFIG
// does; it fails when a domain cannot be a shardlimit service or when
// merged files repeat a top-level descriptor. Everything else that the
// rules cannot express is left out and noted, and so are the descriptors
// that the rules would decide differently from envoy ratelimit (see
// Lookup).
func Convert(cfgs []*Config, opts Options) (*Result, error) {
	opts.Algorithm = cmp.Or(opts.Algorithm, "fixed_window")
	res := &Result{}
	var domains []string
	merged := map[string][]*Descriptor{}
	files := map[*Descriptor]string{}
	for _, c := range cfgs {
		probe := rules.Rule{Service: c.Domain, Name: "n", Descriptor: []rules.DescriptorEntry{{Key: "k"}}, Unlimited: true, Algorithm: opts.Algorithm, FailurePolicy: rules.FailAllow}
		for _, err := range probe.Validate() {
			return nil, fmt.Errorf("%s:%d: domain %q cannot be a shardlimit service: %w", c.File, c.Line, c.Domain, err)
		}
		if _, ok := merged[c.Domain]; !ok {
			domains = append(domains, c.Domain)
		}
		for _, d := range c.Descriptors {
			for _, prev := range merged[c.Domain] {
				if prev.Key == d.Key && prev.Value == d.Value {
					return nil, fmt.Errorf("%s:%d: %w: domain %q: descriptor %s is also at %s:%d", c.File, d.Line, ErrInvalid, c.Domain, entryString(d), files[prev], prev.Line)
				}
			}
			merged[c.Domain] = append(merged[c.Domain], d)
		}
		for d := range walk(c.Descriptors) {
			files[d] = c.File
		}
	}
	for _, domain := range domains {
		cv := &converter{domain: domain, opts: opts, files: files, res: res, names: map[string]*Descriptor{}}
		top := merged[domain]
		cv.convert(top, nil)
		cv.placeholders()
		for range maxRounds {
			if cv.check(top, false) == 0 {
				break
			}
		}
		cv.check(top, true)
	}
	slices.SortStableFunc(res.Notes, func(a, b Note) int {
		return cmp.Or(strings.Compare(a.File, b.File), a.Line-b.Line)
	})
	res.Notes = slices.Compact(res.Notes)
	return res, nil
}

// Load parses the files and converts them; it converts nothing when a
// file is invalid, and then returns every file's problems.
func Load(files []string, opts Options) (*Result, error) {
	cfgs := make([]*Config, 0, len(files))
	var errs []error
	for _, f := range files {
		c, err := ParseFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfgs = append(cfgs, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return Convert(cfgs, opts)
}

// walk yields every node of a tree, depth first.
func walk(top []*Descriptor) func(func(*Descriptor) bool) {
	return func(yield func(*Descriptor) bool) {
		var rec func([]*Descriptor) bool
		rec = func(ds []*Descriptor) bool {
			for _, d := range ds {
				if !yield(d) || !rec(d.Descriptors) {
					return false
				}
			}
			return true
		}
		rec(top)
	}
}

func entryString(d *Descriptor) string {
	if d.Value == "" {
		return d.Key
	}
	return d.Key + "=" + d.Value
}

// converter converts one domain.
type converter struct {
	domain string
	opts   Options
	files  map[*Descriptor]string
	res    *Result
	names  map[string]*Descriptor // rule names taken, by the node that took them
	// pending are the placeholders: nodes with children but no
	// rate_limit, which may need an unlimited rule (see placeholders).
	pending []pending
	// skipped are the nodes left out, with their subtrees.
	skipped map[*Descriptor]bool
	// first is the index of the domain's first rule in res.
	first int
	init  bool
}

type pending struct {
	d    *Descriptor
	path []rules.DescriptorEntry
}

func (cv *converter) note(d *Descriptor, line int, lossy bool, format string, args ...any) {
	cv.res.Notes = append(cv.res.Notes, Note{File: cv.files[d], Line: line, Lossy: lossy, Message: fmt.Sprintf(format, args...)})
}

func (cv *converter) convert(level []*Descriptor, path []rules.DescriptorEntry) {
	if !cv.init {
		cv.first, cv.init, cv.skipped = len(cv.res.Rules), true, map[*Descriptor]bool{}
	}
	for _, d := range level {
		p := append(slices.Clip(path), rules.DescriptorEntry{Key: d.Key, Value: d.Value})
		if why := inexpressible(d, len(p)); why != "" {
			cv.note(d, d.Line, true, "descriptor %s: %s; left out with the descriptors under it", entryString(d), why)
			for n := range walk([]*Descriptor{d}) {
				cv.skipped[n] = true
			}
			continue
		}
		cv.noteInexpressibleKeys(d)
		switch {
		case d.RateLimit != nil:
			cv.add(d, p, cv.rule(d, p))
		case len(d.Descriptors) == 0:
			// envoy ratelimit matches a leaf without a rate_limit and
			// answers without a limit: unlimited, so that no less
			// specific rule decides it.
			cv.add(d, p, rules.Rule{Service: cv.domain, Descriptor: p, Unlimited: true})
		default:
			cv.pending = append(cv.pending, pending{d, p})
		}
		cv.convert(d.Descriptors, p)
	}
}

// noteInexpressibleKeys notes the keys of d that the rules cannot express;
// d converts without them.
func (cv *converter) noteInexpressibleKeys(d *Descriptor) {
	for _, metric := range []struct {
		key string
		on  bool
	}{{"detailed_metric", d.DetailedMetric}, {"value_to_metric", d.ValueToMetric}} {
		if metric.on {
			cv.note(d, d.Line, true, "%s: not converted; shardlimit's metrics are per rule, never per value (labels stay bounded); the values over their limit are in `shardlimit ctl limited` and `shardlimit ctl top`", metric.key)
		}
	}
	if d.ShareThreshold {
		cv.note(d, d.Line, true, "share_threshold: not converted; the values matching %s share one counter in envoy ratelimit, while a rule counts each value on its own counter, so each value gets the whole limit", entryString(d))
	}
	if d.QuotaMode && d.RateLimit != nil {
		cv.note(d, d.Line, true, "quota_mode: converted as shadow: answers over the limit stay OK and are counted, but Envoy's response does not list the descriptor in its dynamic metadata as quota mode does")
	}
}

// inexpressible says why a node cannot be a rule's descriptor entry at
// depth n, or "".
func inexpressible(d *Descriptor, n int) string {
	switch {
	case n > rules.MaxDescriptorEntries:
		return fmt.Sprintf("nested %d deep, over the maximum of %d entries of a rule's descriptor", n, rules.MaxDescriptorEntries)
	case strings.ContainsAny(d.Key, ",=\x00\n"):
		return "a key holding ',' '=' NUL or newline cannot be a rule's descriptor key"
	case strings.ContainsAny(d.Value, ",\x00\n"):
		return "a value holding ',' NUL or newline cannot be a rule's descriptor value"
	}
	return ""
}

// rule converts a node with a rate_limit.
func (cv *converter) rule(d *Descriptor, p []rules.DescriptorEntry) rules.Rule {
	rl := d.RateLimit
	r := rules.Rule{Service: cv.domain, Descriptor: p, Shadow: d.ShadowMode || d.QuotaMode, Name: fit(rl.Name)}
	for _, n := range rl.Replaces {
		r.Replaces = append(r.Replaces, fit(n))
	}
	if len(r.Replaces) > rules.MaxReplaces {
		cv.note(d, rl.Line, true, "replaces: %d names, over the %d of a rule; only the first %d are converted", len(r.Replaces), rules.MaxReplaces, rules.MaxReplaces)
		r.Replaces = r.Replaces[:rules.MaxReplaces]
	}
	var period rules.Duration
	if !rl.Unlimited {
		period, _ = rules.ParseDuration(Units[rl.Unit])
	}
	switch {
	case rl.Unlimited:
		r.Unlimited = true
	case rl.RequestsPerUnit == 0:
		r.DenyAll, r.Period = true, period
	default:
		r.Limit, r.Period, r.Algorithm = int64(rl.RequestsPerUnit), period, cv.opts.Algorithm
		r.AllowRequestOverride = cv.opts.AllowRequestOverride
	}
	return r
}

// add adds a rule converted from d, giving it a name no rule of the
// domain has.
func (cv *converter) add(d *Descriptor, p []rules.DescriptorEntry, r rules.Rule) {
	cv.addOrigin(d, p, r, false)
}

func (cv *converter) addOrigin(d *Descriptor, p []rules.DescriptorEntry, r rules.Rule, added bool) {
	name := cmp.Or(r.Name, rules.FormatDescriptor(p))
	switch {
	case len(name) > rules.MaxNameLength:
		short := shorten(name)
		cv.note(d, d.Line, false, "name %q is longer than the %d bytes of a rule name: named %q", name, rules.MaxNameLength, short)
		name = short
	case name == "*":
		// A top-level key "*" without a value: envoy ratelimit's key is
		// literal, and so is a rule's descriptor key, but "*" as a rule
		// name means every endpoint.
		cv.note(d, d.Line, false, "name %q is only allowed as an endpoint, not as a rule name: named %q", name, fit(name))
		name = fit(name)
	}
	if prev, taken := cv.names[name]; taken {
		unique := name
		for i := 2; cv.names[unique] != nil; i++ {
			unique = fmt.Sprintf("%s#%d", name, i)
		}
		cv.note(d, d.Line, true, "name %q is also the rule of %s:%d; rules of a service need distinct names, so this one is named %q and replaces of %q do not reach it", name, cv.files[prev], prev.Line, unique, name)
		name = unique
	}
	cv.names[name] = d
	if name != rules.FormatDescriptor(p) {
		r.Name = name
	}
	line := d.Line
	if d.RateLimit != nil && !added {
		line = d.RateLimit.Line
	}
	cv.res.Rules = append(cv.res.Rules, r)
	cv.res.Origins = append(cv.res.Origins, Origin{File: cv.files[d], Line: line, Descriptor: d, Added: added})
}

// fit returns a name that fits a rule name: itself, or shortened, with
// NUL and newline as '_' and "*" as "_*". The names in replaces go through
// it too, so they still meet.
func fit(name string) string {
	name = strings.NewReplacer("\x00", "_", "\n", "_").Replace(name)
	if name == "*" {
		return "_*"
	}
	if len(name) > rules.MaxNameLength {
		return shorten(name)
	}
	return name
}

// shorten cuts a name to fit a rule name, keeping it distinct by a
// fingerprint of the whole.
func shorten(name string) string {
	sum := sha256.Sum256([]byte(name))
	suffix := "~" + hex.EncodeToString(sum[:4])
	cut := rules.MaxNameLength - len(suffix)
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + suffix
}

// placeholders adds an unlimited rule for each placeholder (a node with
// children but no rate_limit) that a rule of the same depth would
// otherwise decide: envoy ratelimit picks the placeholder and applies no
// limit.
func (cv *converter) placeholders() {
	for _, pd := range cv.pending {
		for _, r := range cv.res.Rules[cv.first:] {
			if overlaps(r.Descriptor, pd.path) {
				cv.add(pd.d, pd.path, rules.Rule{Service: cv.domain, Descriptor: pd.path, Unlimited: true})
				break
			}
		}
	}
	cv.pending = nil
}
