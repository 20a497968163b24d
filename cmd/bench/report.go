package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a run's result. Its JSON keys are stable: tools read them.
type Report struct {
	Config Config  `json:"config"`
	Phases []Phase `json:"phases"`
	// Ratio compares the target with the baseline; nil unless both ran.
	Ratio *Ratio `json:"ratio,omitempty"`
	// LatencyErrorBound is the largest relative error of a latency
	// quantile (QuantileErrorBound).
	LatencyErrorBound float64 `json:"latency_error_bound"`
}

// Config echoes what was run.
type Config struct {
	API    string `json:"api"`
	Method string `json:"method"`
	// Loop is "closed" or "open".
	Loop string `json:"loop"`
	// Concurrency is the closed loop's requests in flight, or the open
	// loop's cap on them.
	Concurrency int `json:"concurrency"`
	// Rate is the open loop's requests per second; 0 for a closed loop.
	Rate float64 `json:"rate"`
	// DurationS is the measured span; Requests, when above 0, ended it
	// sooner.
	DurationS        float64  `json:"duration_s"`
	Requests         int      `json:"requests"`
	WarmupS          float64  `json:"warmup_s"`
	Connections      int      `json:"connections_per_router"`
	Routers          []string `json:"routers"`
	Users            int      `json:"users"`
	Dist             string   `json:"dist"`
	Flood            float64  `json:"flood,omitempty"`
	FloodNames       string   `json:"flood_names,omitempty"`
	FloodRule        string   `json:"flood_rule,omitempty"`
	Legit            int      `json:"legit,omitempty"`
	LegitChecks      int      `json:"legit_checks,omitempty"`
	ChecksPerRequest int      `json:"checks_per_request"`
	// Service and Endpoint (public API) or Domain and DescriptorKey (Envoy).
	Service       string `json:"service,omitempty"`
	Endpoint      string `json:"endpoint,omitempty"`
	Domain        string `json:"domain,omitempty"`
	DescriptorKey string `json:"descriptor_key,omitempty"`
	TLS           bool   `json:"tls"`
}

// Phase is one measured load: the baseline or the target.
//
// Requests = answered + Errors, and the checks of the answered requests =
// Checks = Allowed + Denied + FailurePolicy.
type Phase struct {
	Name         string  `json:"name"`
	Target       string  `json:"target"`
	ElapsedS     float64 `json:"elapsed_s"`
	Requests     uint64  `json:"requests"`
	Checks       uint64  `json:"checks"`
	RequestsPerS float64 `json:"requests_per_s"`
	ChecksPerS   float64 `json:"checks_per_s"`
	LatencyUs    Latency `json:"latency_us"`
	// Allowed and Denied count checks decided by a counter (or, for
	// Envoy's API, any OK and OVER_LIMIT status).
	Allowed uint64 `json:"allowed"`
	Denied  uint64 `json:"denied"`
	// FailurePolicy counts checks the router answered by a rule's failure
	// policy: the public API's failure_policy flag, Envoy's dynamic
	// metadata mark (envoy.FailurePolicyOf). Always set; a pointer because
	// earlier reports had it null for Envoy's API.
	FailurePolicy *uint64 `json:"failure_policy"`
	// AllowedWithoutRule counts, among Allowed, checks no rule applied to
	// (public API: no rule; Envoy: OK without a current limit and not
	// marked as a policy answer). Above 0, the bench's service, endpoint
	// or descriptor may not match the rules.
	AllowedWithoutRule uint64 `json:"allowed_without_rule"`
	// Errors counts failed requests; ErrorsByCode by gRPC code name, with
	// "bad_answer" for an answer without one decision per check.
	Errors       uint64            `json:"errors"`
	ErrorsByCode map[string]uint64 `json:"errors_by_code"`
	// Failovers counts requests sent once more to the next address after
	// their router was gone (UNAVAILABLE); see worker.send.
	Failovers uint64 `json:"failovers"`
	// BenchCPU is this process's CPU over the measured phase.
	BenchCPU CPU `json:"bench_cpu"`
	// CPUIncludesServer is true for the baseline, whose no-op server runs
	// in this process.
	CPUIncludesServer bool `json:"cpu_includes_server"`
	// NewUsers counts the flood's checks, each for a new user, sent in
	// the measured phase (answered or not), and NewUsersPerMin their rate.
	NewUsers       uint64  `json:"new_users"`
	NewUsersPerMin float64 `json:"new_users_per_min"`
	// Legit is the legitimate users' decisions (Options.Legit); nil
	// without them. Their checks are not in the figures above.
	Legit *Legit `json:"legit,omitempty"`
	// Interrupted is true when the run was cancelled before its end.
	Interrupted bool `json:"interrupted"`
}

// Latency quantiles of requests, in microseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// CPU is user plus system time from getrusage(RUSAGE_SELF).
type CPU struct {
	UserS        float64 `json:"user_s"`
	SysS         float64 `json:"sys_s"`
	UsPerRequest float64 `json:"us_per_request"`
	UsPerCheck   float64 `json:"us_per_check"`
	// Cores is CPU time over wall time: the cores the bench kept busy.
	Cores float64 `json:"cores"`
}

// Ratio is target over baseline.
type Ratio struct {
	RequestsPerS float64 `json:"requests_per_s"`
	ChecksPerS   float64 `json:"checks_per_s"`
	P99          float64 `json:"p99"`
}

func configOf(o *Options) Config {
	c := Config{
		API: o.API, Method: strings.TrimPrefix(methodOf(o.API), "/"), Loop: "closed", Concurrency: o.Concurrency,
		DurationS: o.Duration.Seconds(), Requests: o.Requests, WarmupS: o.Warmup.Seconds(), Connections: o.Connections,
		Routers: o.Routers, Users: o.Users, Dist: o.Dist, Flood: o.Flood,
		Legit: o.Legit, LegitChecks: o.LegitChecks, ChecksPerRequest: o.Checks, TLS: o.TLS != nil,
	}
	if o.Flood > 0 {
		c.FloodNames, c.FloodRule = o.FloodNames, o.FloodRule
	}
	if o.BaselineOnly {
		c.Routers = []string{}
	}
	if o.openLoop() {
		c.Loop, c.Concurrency, c.Rate = "open", o.MaxOutstanding, o.Rate
	}
	if o.API == APIEnvoy {
		c.Domain, c.DescriptorKey = o.Domain, o.DescriptorKey
	} else {
		c.Service, c.Endpoint = o.Service, o.Endpoint
	}
	return c
}

func (r *Report) ratio() {
	var base, target *Phase
	for i := range r.Phases {
		switch r.Phases[i].Name {
		case PhaseBaseline:
			base = &r.Phases[i]
		case PhaseTarget:
			target = &r.Phases[i]
		}
	}
	if base == nil || target == nil || base.RequestsPerS == 0 {
		return
	}
	r.Ratio = &Ratio{RequestsPerS: target.RequestsPerS / base.RequestsPerS}
	if base.ChecksPerS > 0 {
		r.Ratio.ChecksPerS = target.ChecksPerS / base.ChecksPerS
	}
	if base.LatencyUs.P99 > 0 {
		r.Ratio.P99 = target.LatencyUs.P99 / base.LatencyUs.P99
	}
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a reader: the configuration, then one
// column per phase.
func (r *Report) WriteText(w io.Writer) error {
	c := &r.Config
	load := fmt.Sprintf("closed loop, %d in flight", c.Concurrency)
	if c.Loop == "open" {
		load = fmt.Sprintf("open loop, %s req/s scheduled, at most %d in flight", group(c.Rate), c.Concurrency)
	}
	span := fmt.Sprintf("%v", time.Duration(c.DurationS*float64(time.Second)))
	if c.Requests > 0 {
		span = fmt.Sprintf("%d requests (at most %s)", c.Requests, span)
	}
	what := fmt.Sprintf("service %s, endpoint %s", c.Service, c.Endpoint)
	unit := "check"
	if c.API == APIEnvoy {
		what = fmt.Sprintf("domain %s, descriptor [(%s, <user>)]", c.Domain, c.DescriptorKey)
		unit = "descriptor"
	}
	users := fmt.Sprintf("%d users (%s)", c.Users, c.Dist)
	if c.Flood > 0 {
		users += fmt.Sprintf(" and a flood of new users (%.0f%% of %ss)", 100*c.Flood, unit)
		if c.FloodNames == FloodSamePlacement {
			users += fmt.Sprintf(" whose keys under rule %s share one placement hash", c.FloodRule)
		}
	}
	fmt.Fprintf(w, "shardlimit bench: %s (%s)\n", c.API, c.Method)
	fmt.Fprintf(w, "  %s, %s after %v warmup; %d connection(s) per router; %s, %d %s(s) per request; %s\n\n",
		load, span, time.Duration(c.WarmupS*float64(time.Second)), c.Connections, users, c.ChecksPerRequest, unit, what)

	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(p *Phase) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for i := range r.Phases {
			fmt.Fprintf(tw, "%s\t", cell(&r.Phases[i]))
		}
		fmt.Fprintln(tw)
	}
	row("", func(p *Phase) string { return p.Name })
	row("requests/s", func(p *Phase) string { return group(p.RequestsPerS) })
	row(unit+"s/s", func(p *Phase) string { return group(p.ChecksPerS) })
	row("requests", func(p *Phase) string { return group(float64(p.Requests)) })
	for _, q := range []struct {
		name string
		v    func(l *Latency) float64
	}{
		{"latency p50", func(l *Latency) float64 { return l.P50 }},
		{"p90", func(l *Latency) float64 { return l.P90 }},
		{"p99", func(l *Latency) float64 { return l.P99 }},
		{"p99.9", func(l *Latency) float64 { return l.P999 }},
		{"max", func(l *Latency) float64 { return l.Max }},
	} {
		row(q.name, func(p *Phase) string { return ms(q.v(&p.LatencyUs)) })
	}
	if c.Flood > 0 {
		row("new users/min", func(p *Phase) string { return group(p.NewUsersPerMin) })
	}
	row("allowed", func(p *Phase) string { return group(float64(p.Allowed)) })
	row("denied", func(p *Phase) string { return group(float64(p.Denied)) })
	row("failure policy", func(p *Phase) string { return group(float64(policyOf(p))) })
	row("errors", func(p *Phase) string { return group(float64(p.Errors)) })
	row("bench CPU/request", func(p *Phase) string {
		s := fmt.Sprintf("%.1f µs", p.BenchCPU.UsPerRequest)
		if p.CPUIncludesServer {
			s += " *"
		}
		return s
	})
	row("bench CPU cores", func(p *Phase) string { return fmt.Sprintf("%.2f", p.BenchCPU.Cores) })
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	for i := range r.Phases {
		p := &r.Phases[i]
		fmt.Fprintf(w, "%s: %s\n", p.Name, p.Target)
		if len(p.ErrorsByCode) > 0 {
			codes := make([]string, 0, len(p.ErrorsByCode))
			for code, n := range p.ErrorsByCode {
				codes = append(codes, fmt.Sprintf("%s %d", code, n))
			}
			slices.Sort(codes)
			fmt.Fprintf(w, "  errors by code: %s\n", strings.Join(codes, ", "))
		}
		if p.Failovers > 0 {
			fmt.Fprintf(w, "  %d requests sent once more to the next router after theirs was gone\n", p.Failovers)
		}
		if p.AllowedWithoutRule > 0 {
			if c.API == APIEnvoy {
				fmt.Fprintf(w, "  %s descriptors were OK without a limit: no rule matches the domain and descriptor\n", group(float64(p.AllowedWithoutRule)))
			} else {
				fmt.Fprintf(w, "  %s checks were allowed without a rule: no rule matches the service and endpoint\n", group(float64(p.AllowedWithoutRule)))
			}
		}
		if c.Loop == "open" && c.Requests == 0 && p.RequestsPerS < 0.95*c.Rate {
			fmt.Fprintf(w, "  only %s of the %s req/s scheduled: with %d in flight at most, slots that came due too late were dropped at the end\n",
				group(p.RequestsPerS), group(c.Rate), c.Concurrency)
		}
		if p.Legit != nil {
			fmt.Fprintf(w, "  legitimate users, on a schedule of their own beside the load:\n")
			for _, g := range p.Legit.Groups {
				fmt.Fprintf(w, "    %s\n", g.String())
			}
		}
		if p.Interrupted {
			fmt.Fprintln(w, "  interrupted before its end")
		}
	}
	for i := range r.Phases {
		if r.Phases[i].CPUIncludesServer {
			fmt.Fprintln(w, "* the baseline's CPU includes its in-process no-op server")
			break
		}
	}
	if r.Ratio != nil {
		fmt.Fprintf(w, "target/baseline: %.1f%% of the requests/s, p99 × %.2f\n", 100*r.Ratio.RequestsPerS, r.Ratio.P99)
	}
	fmt.Fprintf(w, "latency quantiles within ±%.2f%%\n", 100*r.LatencyErrorBound)
	return nil
}

// group formats v rounded to an integer, with thousands separators.
func group(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}

// ms formats microseconds as milliseconds.
func ms(us float64) string {
	return fmt.Sprintf("%.3f ms", us/1000)
}
