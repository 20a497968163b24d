package admin

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Router is what the Admin API needs of the router it serves on: the
// shards it routes to now, the shard map version it routes by, and its
// over-limit cache.
type Router interface {
	// Routing returns the partition table in force and the shards the
	// router routes to, in the table's member order.
	Routing() (*shardmap.Table, []Shard)
	// MapVersion returns the version of the shard map in force; 0 when
	// none.
	MapVersion() int64
	// ForgetKey drops what the over-limit cache holds for a counter, once
	// it was reset.
	ForgetKey(service, rule, user string)
}

// Shard is a shard the router routes to, with the client the router
// calls it through: nil when it could not be dialed.
type Shard struct {
	Member member.Member
	Client shardlimitv1.ShardClient
}

// Options configure the Admin API.
type Options struct {
	// Etcd is the router's etcd client, where rules, grants, the shard map
	// history and run records are. Required.
	Etcd *clientv3.Client
	// Prefix is the etcd key prefix. Required.
	Prefix string
	// RuleBounds bound the rules an apply may store (the router's).
	RuleBounds rules.Bounds
	// Grants are the router's grants file's: they win over stored grants,
	// so the API refuses to store one for the same identity.
	Grants []auth.Grant
	// Dial are the options of a connection to the rebalance leader.
	Dial []grpc.DialOption
	// Logger receives one line per change an operator made.
	Logger *slog.Logger
}

// Register registers the Admin API of router r on s.
func Register(s grpc.ServiceRegistrar, r Router, o Options) {
	shardlimitv1.RegisterAdminServer(s, &admin{r: r, etcd: o.Etcd, prefix: o.Prefix, layout: etcd.Layout(o.Prefix), ruleBounds: o.RuleBounds,
		grants: o.Grants, dial: o.Dial, log: o.Logger})
}

// admin serves the Admin API.
type admin struct {
	shardlimitv1.UnimplementedAdminServer
	r          Router
	etcd       *clientv3.Client
	prefix     string
	layout     etcd.Layout // of prefix
	ruleBounds rules.Bounds
	grants     []auth.Grant
	dial       []grpc.DialOption
	log        *slog.Logger
}

// maxRulesFile bounds ApplyRulesRequest.yaml.
const maxRulesFile = 1 << 20

// etcdTimeout bounds each admin call's etcd work.
const etcdTimeout = 5 * time.Second

func (a *admin) ApplyRules(ctx context.Context, req *shardlimitv1.ApplyRulesRequest) (*shardlimitv1.ApplyRulesResponse, error) {
	if len(req.Yaml) > maxRulesFile {
		return nil, status.Errorf(codes.InvalidArgument, "yaml: %d bytes exceed the maximum of %d", len(req.Yaml), maxRulesFile)
	}
	name := req.FileName
	if name == "" {
		name = "rules.yaml"
	}
	desired, err := rules.Parse(name, req.Yaml)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	changes, rev, err := rulestore.Apply(ctx, a.etcd, a.prefix, desired, a.ruleBounds, req.Prune, req.DryRun)
	switch {
	case errors.Is(err, rulestore.ErrConflict):
		return nil, status.Error(codes.Aborted, err.Error())
	case errors.Is(err, rulestore.ErrTooManyChanges), errors.Is(err, rules.ErrTooManyRules):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	resp := &shardlimitv1.ApplyRulesResponse{Applied: !req.DryRun && len(changes) > 0, Revision: rev}
	for _, c := range changes {
		rc := &shardlimitv1.RuleChange{Service: c.Service(), Name: c.Name()}
		switch c.Op {
		case "add":
			rc.Op = shardlimitv1.RuleChange_OP_ADD
		case "change":
			rc.Op = shardlimitv1.RuleChange_OP_CHANGE
		case "delete":
			rc.Op = shardlimitv1.RuleChange_OP_DELETE
		}
		if c.Before != nil {
			b, _ := rulestore.Encode(c.Before)
			rc.Before = string(b)
		}
		if c.After != nil {
			b, _ := rulestore.Encode(c.After)
			rc.After = string(b)
		}
		resp.Changes = append(resp.Changes, rc)
	}
	if resp.Applied {
		a.log.Info("rules applied", "file", name, "changes", len(changes), "revision", rev)
	}
	return resp, nil
}

func (a *admin) GetRules(ctx context.Context, req *shardlimitv1.GetRulesRequest) (*shardlimitv1.GetRulesResponse, error) {
	if strings.Contains(req.Service, "/") {
		return nil, status.Error(codes.InvalidArgument, "service: must not contain '/'")
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	entries, invalid, rev, err := rulestore.List(ctx, a.etcd, a.prefix, req.Service)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	rs := make([]rules.Rule, len(entries))
	for i, e := range entries {
		rs[i] = e.Rule
	}
	b, err := rulestore.File(rs)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &shardlimitv1.GetRulesResponse{Yaml: b, Revision: rev}
	for _, in := range invalid {
		resp.Invalid = append(resp.Invalid, in.Key)
	}
	return resp, nil
}

func (a *admin) DeleteRule(ctx context.Context, req *shardlimitv1.DeleteRuleRequest) (*shardlimitv1.DeleteRuleResponse, error) {
	switch {
	case req.Service == "" || strings.Contains(req.Service, "/"):
		return nil, status.Error(codes.InvalidArgument, "service: required, without '/'")
	case req.Name == "":
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	existed, err := rulestore.Delete(ctx, a.etcd, a.prefix, req.Service, req.Name)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "etcd: %v", err)
	}
	if existed {
		a.log.Info("rule deleted", "service", req.Service, "name", req.Name)
	}
	return &shardlimitv1.DeleteRuleResponse{Existed: existed}, nil
}

// ListMembers lists the live shards this router routes to, each with its
// Stats, asked in parallel: all of it to an operator, to a service caller
// only what concerns its services (membersFor).
func (a *admin) ListMembers(ctx context.Context, _ *shardlimitv1.ListMembersRequest) (*shardlimitv1.ListMembersResponse, error) {
	table, shards := a.r.Routing()
	counts := table.Count()
	resp := &shardlimitv1.ListMembersResponse{Partitions: uint32(table.Partitions())}
	resp.Members = make([]*shardlimitv1.Member, len(shards))
	var wg sync.WaitGroup
	for i, p := range shards {
		m := p.Member
		out := &shardlimitv1.Member{
			Id: m.ID, Addr: m.Addr, Zone: m.Zone, Version: m.Version,
			StartedUnixNs: m.Started.UnixNano(), ReadyUnixNs: m.Ready.UnixNano(), Partitions: uint32(counts[m.ID]),
		}
		resp.Members[i] = out
		if p.Client == nil {
			out.Error = "no client"
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			st, err := p.Client.Stats(cctx, &shardlimitv1.StatsRequest{})
			if err != nil {
				out.Error = status.Convert(err).Message()
				return
			}
			out.Stats = st
		})
	}
	wg.Wait()
	membersFor(ctx, resp)
	return resp, nil
}

// membersFor leaves in resp what the caller may read: an operator reads
// everything; a service caller reads each member's id, zone, version,
// start and partition count, and the hot keys of its own services only,
// never a shard's address, its load, its keys, its memory or another
// service's hot keys, nor an error message (which may name an address).
func membersFor(ctx context.Context, resp *shardlimitv1.ListMembersResponse) {
	c := auth.FromContext(ctx)
	if c.IsOperator() {
		return
	}
	for _, m := range resp.Members {
		m.Addr = ""
		if m.Error != "" {
			m.Error = "unreachable"
		}
		if m.Stats == nil {
			continue
		}
		var own []*shardlimitv1.HotKey
		for _, k := range m.Stats.HotKeys {
			if c.Allows(k.Service) {
				own = append(own, k)
			}
		}
		m.Stats = &shardlimitv1.StatsResponse{Id: m.Stats.Id, HotKeys: own}
	}
}

// ListLimited asks every live shard for the episodes of a service and
// merges them, newest first.
func (a *admin) ListLimited(ctx context.Context, req *shardlimitv1.ListLimitedRequest) (*shardlimitv1.ListLimitedResponse, error) {
	if req.Service == "" {
		return nil, status.Error(codes.InvalidArgument, "service: required")
	}
	if err := auth.FromContext(ctx).MayUse(req.Service); err != nil {
		return nil, err
	}
	_, shards := a.r.Routing()
	resp := &shardlimitv1.ListLimitedResponse{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sreq := &shardlimitv1.LimitedRequest{Service: req.Service, SinceUnixNs: req.SinceUnixNs, UntilUnixNs: req.UntilUnixNs, Limit: req.Limit}
	var badArg error
	for _, p := range shards {
		if p.Client == nil {
			mu.Lock()
			resp.Unreachable = append(resp.Unreachable, p.Member.ID)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			lr, err := p.Client.Limited(cctx, sreq)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case status.Code(err) == codes.InvalidArgument:
				badArg = err
			case err != nil:
				resp.Unreachable = append(resp.Unreachable, p.Member.ID)
			default:
				resp.Episodes = append(resp.Episodes, lr.Episodes...)
			}
		})
	}
	wg.Wait()
	if badArg != nil {
		return nil, badArg
	}
	slices.SortFunc(resp.Episodes, func(x, y *shardlimitv1.Episode) int {
		switch {
		case x.BeganUnixNs > y.BeganUnixNs:
			return -1
		case x.BeganUnixNs < y.BeganUnixNs:
			return 1
		}
		return strings.Compare(x.User, y.User)
	})
	if limit := int(req.Limit); limit > 0 && len(resp.Episodes) > limit {
		resp.Episodes = resp.Episodes[:limit]
	}
	slices.Sort(resp.Unreachable)
	return resp, nil
}

// ResetKey forwards a reset to the shard that owns the counter.
func (a *admin) ResetKey(ctx context.Context, req *shardlimitv1.ResetKeyRequest) (*shardlimitv1.ResetKeyResponse, error) {
	switch {
	case req.Service == "":
		return nil, status.Error(codes.InvalidArgument, "service: required")
	case req.Rule == "":
		return nil, status.Error(codes.InvalidArgument, "rule: required")
	case req.User == "":
		return nil, status.Error(codes.InvalidArgument, "user: required")
	}
	table, shards := a.r.Routing()
	owner, ok := table.Owner(key.Partition(key.Hash(req.Service, req.Rule, req.User), table.Partitions()))
	if !ok {
		return nil, status.Error(codes.Unavailable, "no live shard owns the counter")
	}
	for _, p := range shards {
		if p.Member.ID != owner.ID || p.Client == nil {
			continue
		}
		r, err := p.Client.Reset(ctx, &shardlimitv1.ResetRequest{Service: req.Service, Rule: req.Rule, User: req.User})
		if err != nil {
			return nil, status.Errorf(status.Code(err), "shard %s: %s", owner.ID, status.Convert(err).Message())
		}
		a.r.ForgetKey(req.Service, req.Rule, req.User)
		a.log.Info("counter reset", "service", req.Service, "rule", req.Rule, "shard", owner.ID, "existed", r.Existed, "caller", auth.FromContext(ctx).Name())
		return &shardlimitv1.ResetKeyResponse{Existed: r.Existed, Shard: owner.ID}, nil
	}
	return nil, status.Errorf(codes.Unavailable, "shard %s: no connection", owner.ID)
}
