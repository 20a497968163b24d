package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardlimit/shardlimit/shard/rpc/vtcodec"
)

// Phase names.
const (
	PhaseBaseline = "baseline"
	PhaseTarget   = "target"
)

// Run runs the phases o asks for (the baseline, the routers, or both in
// that order) and reports them. When progress is not nil, a live line is
// rewritten on it once a second; pass a terminal only. A cancelled ctx
// ends the run early: the phases so far are reported, marked interrupted.
func Run(ctx context.Context, o Options, progress io.Writer) (*Report, error) {
	o.fill()
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.prepare()
	names := userNames(o.Users)
	rep := &Report{Config: configOf(&o), LatencyErrorBound: QuantileErrorBound}
	if o.Baseline || o.BaselineOnly {
		srv, err := StartBaseline("127.0.0.1:0", o.BaselineTLS)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		bo := o
		if o.BaselineTLS == nil {
			bo.TLS = nil // a plain-text baseline is called in plain text
		}
		ph, err := runPhase(ctx, &bo, PhaseBaseline, "in-process no-op "+srv.Addr(), []string{srv.Addr()}, names, progress)
		srv.Stop()
		if err != nil {
			if ctx.Err() != nil {
				return rep, nil // interrupted during the warmup
			}
			return nil, err
		}
		ph.CPUIncludesServer = true
		rep.Phases = append(rep.Phases, *ph)
	}
	if !o.BaselineOnly && ctx.Err() == nil {
		ph, err := runPhase(ctx, &o, PhaseTarget, strings.Join(o.Routers, ","), o.Routers, names, progress)
		if err != nil {
			if ctx.Err() != nil {
				return rep, nil
			}
			return nil, err
		}
		rep.Phases = append(rep.Phases, *ph)
	}
	rep.ratio()
	return rep, nil
}

// runPhase loads addrs: a warmup, if any, then the measured phase.
func runPhase(ctx context.Context, o *Options, name, target string, addrs []string, names []string, progress io.Writer) (*Phase, error) {
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if o.TLS != nil { // the baseline's is nil unless it serves TLS (Run)
		creds = credentials.NewTLS(o.TLS)
	}
	var conns []endpoint
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	if o.API == APIClient || o.API == APIClientStream {
		c, err := goClientEndpoint(addrs, o.TLS, o.API == APIClientStream, o.Timeout)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		conns = append(conns, c)
	}
	for _, addr := range addrs {
		for range o.Connections {
			if o.API == APIClient || o.API == APIClientStream {
				break
			}
			if o.API == APIHTTP {
				conns = append(conns, httpEndpoint(addr, o.TLS, o.workers()))
				continue
			}
			c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), vtcodec.CallerDialOption())
			if err != nil {
				return nil, fmt.Errorf("%s: dial %s: %w", name, addr, err)
			}
			c.Connect()
			conns = append(conns, endpoint{conn: c})
		}
	}
	n := o.workers()
	newWorkers := func() []*worker {
		ws := make([]*worker, n)
		for i := range ws {
			ws[i] = &worker{id: i, req: newRequest(o), pick: newPicker(o, i), conns: conns, at: i % len(conns), step: o.Connections, names: names, st: newStats()}
			if len(conns) == 1 {
				ws[i].step = 1 // one Go client: it fails over itself
			}
		}
		return ws
	}
	ws := newWorkers()
	if o.Warmup > 0 {
		l := &load{o: o, workers: ws, span: o.Warmup}
		stopLine := startProgress(progress, name+" warmup", ws)
		l.run(ctx)
		stopLine()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Fresh stats; messages, users' generators and connections go on.
		for _, w := range ws {
			w.st = newStats()
		}
	}
	span := o.Duration
	l := &load{o: o, workers: ws, span: span, count: o.Requests}
	stopLine := startProgress(progress, name, ws)
	if o.Measured != nil {
		o.Measured(name, true)
	}
	var legit *legitRun
	if name == PhaseTarget && o.Legit > 0 {
		legit = startLegit(ctx, o, conns[0].conn, span)
	}
	before, floodBefore := rusage(), floodSeq.Load()
	elapsed := l.run(ctx)
	after, floodAfter := rusage(), floodSeq.Load()
	if o.Measured != nil {
		o.Measured(name, false)
	}
	stopLine()
	ph := merge(name, target, ws, elapsed, o)
	ph.NewUsers = floodAfter - floodBefore
	ph.NewUsersPerMin = float64(ph.NewUsers) / elapsed.Minutes()
	if legit != nil {
		ph.Legit = legit.wait()
	}
	ph.Interrupted = ctx.Err() != nil
	ph.BenchCPU = cpuOf(before, after, ph.Requests, ph.Checks, elapsed)
	if ph.Requests == 0 && !ph.Interrupted {
		return nil, errors.New(name + ": no request completed")
	}
	return ph, nil
}

// merge sums the workers' stats into a phase's figures.
func merge(name, target string, ws []*worker, elapsed time.Duration, o *Options) *Phase {
	ph := &Phase{Name: name, Target: target, ElapsedS: elapsed.Seconds(), ErrorsByCode: map[string]uint64{}}
	var h snapshot
	var policy, noRule uint64
	for _, w := range ws {
		st := w.st
		h.add(&st.hist)
		ph.Requests += st.requests.Load()
		ph.Errors += st.errors.Load()
		ph.Failovers += st.failovers
		ph.Checks += st.checks
		ph.Allowed += st.allowed
		ph.Denied += st.denied
		policy += st.policy
		noRule += st.noRule
		for c, k := range st.codes {
			if k > 0 {
				ph.ErrorsByCode[codes.Code(c).String()] += k
			}
		}
		if st.badAnswers > 0 {
			ph.ErrorsByCode["bad_answer"] += st.badAnswers
		}
	}
	ph.FailurePolicy = &policy
	ph.AllowedWithoutRule = noRule
	if elapsed > 0 {
		ph.RequestsPerS = float64(ph.Requests) / elapsed.Seconds()
		ph.ChecksPerS = float64(ph.Checks) / elapsed.Seconds()
	}
	ph.LatencyUs = Latency{
		P50: us(h.quantile(0.50)), P90: us(h.quantile(0.90)), P99: us(h.quantile(0.99)),
		P999: us(h.quantile(0.999)), Mean: us(h.mean()), Max: us(time.Duration(h.max)),
	}
	return ph
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// rusage is this process's user and system CPU time so far, every
// thread included.
func rusage() [2]time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return [2]time.Duration{}
	}
	return [2]time.Duration{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func cpuOf(before, after [2]time.Duration, requests, checks uint64, elapsed time.Duration) CPU {
	user, sys := after[0]-before[0], after[1]-before[1]
	c := CPU{UserS: user.Seconds(), SysS: sys.Seconds()}
	if requests > 0 {
		c.UsPerRequest = us(user+sys) / float64(requests)
	}
	if checks > 0 {
		c.UsPerCheck = us(user+sys) / float64(checks)
	}
	if elapsed > 0 {
		c.Cores = (user + sys).Seconds() / elapsed.Seconds()
	}
	return c
}
