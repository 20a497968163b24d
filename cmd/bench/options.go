package bench

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/key/keytest"
)

// APIs the bench can call.
const (
	// APIPublic is shardlimit.v1.RateLimiter/Check.
	APIPublic = "public"
	// APIEnvoy is envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit.
	APIEnvoy = "envoy"
	// APIHTTP is the public API through the router's HTTP/JSON API, POST
	// /v1/check (router --http-listen): Routers are its addresses.
	APIHTTP = "http"
	// APIClient is the public API through the Go client (router/client),
	// one check per CheckOne, over unary Check.
	APIClient = "client"
	// APIClientStream is the Go client with Options.Stream: its
	// concurrent CheckOne calls share CheckStream messages.
	APIClientStream = "client-stream"
)

// User distributions.
const (
	DistUniform = "uniform"
	DistZipf    = "zipf"
)

// Names of the flood's users (Options.FloodNames).
const (
	// FloodRandom names them flood-<run>-<n>: spread over every partition
	// as the placement hash spreads any names.
	FloodRandom = "random"
	// FloodSamePlacement names them so that all their keys share one
	// placement hash (shard/key/keytest.Colliding), as an attacker can:
	// one partition, one shard.
	FloodSamePlacement = "same-placement"
)

// Options configure a run. Flags of `shardlimit bench` map 1:1 onto them.
type Options struct {
	// API is APIPublic (default), APIEnvoy, APIHTTP, APIClient or
	// APIClientStream.
	API string
	// Routers are the gRPC addresses to load (for APIHTTP, the HTTP/JSON
	// API's, as shardlimit dev's 127.0.0.1:8082), round robin over their
	// connections; default 127.0.0.1:8081 (shardlimit dev's router).
	// Unused with BaselineOnly.
	Routers []string
	// Concurrency is the closed loop's number of workers, each with one
	// request in flight; default 50. Ignored when Rate is set.
	Concurrency int
	// Rate, when above 0, runs an open loop instead: this many requests per
	// second in all, each issued at its scheduled time whatever the
	// answers, its latency measured from that time (no coordinated
	// omission). Default 0: closed loop.
	Rate float64
	// MaxOutstanding caps the open loop's requests in flight; it is the
	// number of its workers, each taking every MaxOutstanding-th slot of
	// the schedule. A slot whose worker is still busy waits, and the wait
	// counts in its latency. Default 1000.
	MaxOutstanding int
	// Duration of the measured phase; default 10s. Ignored when Requests
	// is set.
	Duration time.Duration
	// Requests, when above 0, ends the measured phase after this many
	// requests instead of after Duration (for tests). Default 0.
	Requests int
	// Warmup runs the same load, unmeasured, before the measured phase;
	// default 0 (the flag's default is 1s).
	Warmup time.Duration
	// Connections is the number of gRPC connections per router; workers
	// take them round robin. Default 1.
	Connections int
	// Users is the number of distinct users the requests are spread over;
	// default 10000.
	Users int
	// Dist is how users are drawn: DistUniform (default) or DistZipf.
	Dist string
	// ZipfS is the zipf exponent s (> 1); default 1.1. ZipfV is its v
	// (>= 1); default 1. See math/rand/v2.NewZipf.
	ZipfS, ZipfV float64
	// Flood is the share of checks, in [0, 1], each for a new user never
	// seen before (a flood of new users, as an attack or a launch brings),
	// beside the Users drawn as Dist says; default 0.
	Flood float64
	// FloodNames is how the flood's users are named: FloodRandom (default)
	// or FloodSamePlacement, printable names whose keys under Service and
	// FloodRule share one placement hash. Their names repeat after
	// keytest.Colliding.Len (268M) of them.
	FloodNames string
	// FloodRule is the name of the rule the router applies to Service's
	// checks, which must be keyed on user alone: the placement hash is of
	// service, rule and user. Required with FloodSamePlacement, unused
	// otherwise.
	FloodRule string
	// Legit is the number of legitimate users checked on a fixed schedule
	// beside the load, in the target phase only, whose decisions are
	// reported apart (see legit.go); default 0: none. Public API only.
	Legit int
	// LegitChecks is the checks each even-numbered legitimate user is sent
	// over the measured phase; odd-numbered ones are sent half. Default 150.
	LegitChecks int
	// Checks is the number of checks (public API) or descriptors (Envoy)
	// per request, each for its own user; default 1.
	Checks int
	// Service and Endpoint of the public API's checks; default shop and
	// /search, which the sample rules limit to 100 per minute per user.
	Service, Endpoint string
	// Domain and DescriptorKey of Envoy's requests: each descriptor is
	// [(DescriptorKey, user)]; default shop and user_id, which the sample
	// rules limit to 100 per minute per user.
	Domain, DescriptorKey string
	// Timeout bounds every request: a request still unanswered that long
	// after the end of its phase is cancelled and counted as an error.
	// Default 10s.
	Timeout time.Duration
	// TLS to the routers; default nil: plain text.
	TLS *tls.Config
	// BaselineTLS, when set, makes the no-op baseline serve TLS with this
	// server config, so that the baseline pays the same handshake and
	// encryption as a secure router (the client uses TLS for both); default
	// nil: the baseline serves plain text, and the client calls it so.
	BaselineTLS *tls.Config
	// Baseline first runs the same load against an in-process no-op
	// server that serves both APIs with the same message shapes, then
	// against Routers, and reports both and their ratio. Default false.
	Baseline bool
	// BaselineOnly runs against the no-op server only: the ceiling of this
	// client on this machine. Default false.
	BaselineOnly bool
	// Seed of the users' random draws; default 1. Each worker draws from
	// its own generator, seeded with (Seed, worker).
	Seed uint64
	// collide makes the flood's FloodSamePlacement names; set by
	// prepare, nil for FloodRandom.
	collide *keytest.Colliding
	// Measured, when set, is called as each phase's measured window opens
	// (begin true) and closes, with the phase's name. The table runner
	// uses it to read other processes' CPU over the same window.
	Measured func(phase string, begin bool)
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		API: APIPublic, Routers: []string{"127.0.0.1:8081"}, Concurrency: 50, MaxOutstanding: 1000,
		Duration: 10 * time.Second, Connections: 1, Users: 10000, Dist: DistUniform, FloodNames: FloodRandom, ZipfS: 1.1, ZipfV: 1,
		LegitChecks: 150, Checks: 1, Service: "shop", Endpoint: "/search", Domain: "shop", DescriptorKey: "user_id",
		Timeout: 10 * time.Second, Seed: 1,
	}
}

// fill sets every zero field to its default.
func (o *Options) fill() {
	d := DefaultOptions()
	if len(o.Routers) == 0 {
		o.Routers = d.Routers
	}
	o.API = cmp.Or(o.API, d.API)
	o.Concurrency = cmp.Or(o.Concurrency, d.Concurrency)
	o.MaxOutstanding = cmp.Or(o.MaxOutstanding, d.MaxOutstanding)
	o.Duration = cmp.Or(o.Duration, d.Duration)
	o.Connections = cmp.Or(o.Connections, d.Connections)
	o.Users = cmp.Or(o.Users, d.Users)
	o.Dist = cmp.Or(o.Dist, d.Dist)
	o.FloodNames = cmp.Or(o.FloodNames, d.FloodNames)
	o.ZipfS = cmp.Or(o.ZipfS, d.ZipfS)
	o.ZipfV = cmp.Or(o.ZipfV, d.ZipfV)
	o.Checks = cmp.Or(o.Checks, d.Checks)
	o.LegitChecks = cmp.Or(o.LegitChecks, d.LegitChecks)
	o.Service = cmp.Or(o.Service, d.Service)
	o.Endpoint = cmp.Or(o.Endpoint, d.Endpoint)
	o.Domain = cmp.Or(o.Domain, d.Domain)
	o.DescriptorKey = cmp.Or(o.DescriptorKey, d.DescriptorKey)
	o.Timeout = cmp.Or(o.Timeout, d.Timeout)
	o.Seed = cmp.Or(o.Seed, d.Seed)
}

func (o *Options) validate() error {
	switch {
	case o.API != APIPublic && o.API != APIEnvoy && o.API != APIHTTP && o.API != APIClient && o.API != APIClientStream:
		return fmt.Errorf("api: %q is not %s, %s, %s, %s or %s", o.API, APIPublic, APIEnvoy, APIHTTP, APIClient, APIClientStream)
	case (o.API == APIClient || o.API == APIClientStream) && (o.Checks != 1 || o.Rate > 0 || o.Flood > 0 || o.Legit > 0):
		return fmt.Errorf("api: the Go client (%s) is loaded with one check per call in a closed loop, without --checks, --rate, --flood or --legit", o.API)
	case o.API == APIHTTP && (o.Baseline || o.BaselineOnly):
		return fmt.Errorf("baseline: the no-op server serves gRPC only, not the %s API", APIHTTP)
	case o.Concurrency < 1 || o.Concurrency > 100_000:
		return fmt.Errorf("concurrency: %d not in 1..100000", o.Concurrency)
	case o.Rate < 0:
		return fmt.Errorf("rate: %v is negative", o.Rate)
	case o.MaxOutstanding < 1 || o.MaxOutstanding > 100_000:
		return fmt.Errorf("max outstanding: %d not in 1..100000", o.MaxOutstanding)
	case o.Duration < 0:
		return fmt.Errorf("duration: %v is negative", o.Duration)
	case o.Requests < 0:
		return fmt.Errorf("requests: %d is negative", o.Requests)
	case o.Warmup < 0:
		return fmt.Errorf("warmup: %v is negative", o.Warmup)
	case o.Connections < 1 || o.Connections > 1000:
		return fmt.Errorf("connections: %d not in 1..1000", o.Connections)
	case o.Users < 1 || o.Users > 100_000_000:
		return fmt.Errorf("users: %d not in 1..100000000", o.Users)
	case o.Dist != DistUniform && o.Dist != DistZipf:
		return fmt.Errorf("dist: %q is not %s or %s", o.Dist, DistUniform, DistZipf)
	case o.Dist == DistZipf && !(o.ZipfS > 1):
		return fmt.Errorf("zipf s: %v must be greater than 1", o.ZipfS)
	case o.Dist == DistZipf && !(o.ZipfV >= 1):
		return fmt.Errorf("zipf v: %v must be at least 1", o.ZipfV)
	case !(o.Flood >= 0 && o.Flood <= 1):
		return fmt.Errorf("flood: %v not in 0..1", o.Flood)
	case o.FloodNames != FloodRandom && o.FloodNames != FloodSamePlacement:
		return fmt.Errorf("flood-names: %q is not %s or %s", o.FloodNames, FloodRandom, FloodSamePlacement)
	case o.FloodNames == FloodSamePlacement && o.Flood == 0:
		return fmt.Errorf("flood-names: %s names the flood's users, but flood is 0", FloodSamePlacement)
	case o.FloodNames == FloodSamePlacement && o.API == APIEnvoy:
		return fmt.Errorf("flood-names: %s floods through the %s or %s API only, not %s", FloodSamePlacement, APIPublic, APIHTTP, o.API)
	case o.FloodNames == FloodSamePlacement && o.FloodRule == "":
		return fmt.Errorf("flood-rule: required with flood-names %s: the name of the rule that limits service %s's checks, keyed on user (placement hashes service, rule and user)", FloodSamePlacement, o.Service)
	case len(o.FloodRule) > key.MaxRuleLength:
		return fmt.Errorf("flood-rule: length %d exceeds the maximum of %d bytes", len(o.FloodRule), key.MaxRuleLength)
	case o.Legit < 0 || o.Legit > 1_000_000:
		return fmt.Errorf("legit: %d not in 0..1000000", o.Legit)
	case o.LegitChecks < 2 || o.LegitChecks > 100_000:
		return fmt.Errorf("legit checks: %d not in 2..100000", o.LegitChecks)
	case o.Legit > 0 && o.API != APIPublic:
		return fmt.Errorf("legit: legitimate users are checked through the %s API only, not %s", APIPublic, o.API)
	case o.Checks < 1 || o.Checks > 1000:
		return fmt.Errorf("checks: %d not in 1..1000", o.Checks)
	case o.API == APIEnvoy && o.Checks > 100:
		return fmt.Errorf("checks: %d descriptors exceed Envoy's API bound of 100 per request", o.Checks)
	case o.Timeout < 0:
		return fmt.Errorf("timeout: %v is negative", o.Timeout)
	case !o.BaselineOnly && len(o.Routers) == 0:
		return fmt.Errorf("routers: at least one is required")
	}
	if !o.BaselineOnly {
		for i, r := range o.Routers {
			if r == "" {
				return fmt.Errorf("routers[%d]: empty address", i)
			}
		}
	}
	return nil
}

// prepare builds what the run's workers share read-only once o is valid:
// the flood's colliding names (a few tens of milliseconds), new in every
// process (their salt is the random flood's prefix).
func (o *Options) prepare() {
	if o.FloodNames == FloodSamePlacement {
		o.collide = keytest.NewColliding(o.Service, o.FloodRule, floodPrefix)
	}
}

// openLoop reports whether the run issues requests on a schedule.
func (o *Options) openLoop() bool { return o.Rate > 0 }

// workers is the number of worker goroutines of a phase.
func (o *Options) workers() int {
	if o.openLoop() {
		return o.MaxOutstanding
	}
	return o.Concurrency
}
