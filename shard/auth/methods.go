package auth

import "strings"

// Permission is which callers may call a method: a set of roles, or
// anyone, even without credentials.
type Permission uint8

// The permissions the table grants.
const (
	// Service lets a service identity call, for the services of its grant
	// only: the handler checks each service it acts for with
	// Caller.MayUse.
	Service Permission = 1 << iota
	// Operator lets an operator call.
	Operator
	// Internal lets a router or the rebalance job call.
	Internal
	// Anyone lets every caller call, even without credentials.
	Anyone
)

func (p Permission) allows(r Role) bool {
	switch r {
	case roleUnchecked:
		return true
	case RoleService:
		return p&(Service|Anyone) != 0
	case RoleOperator:
		return p&(Operator|Anyone) != 0
	case RoleInternal:
		return p&(Internal|Anyone) != 0
	}
	return p&Anyone != 0
}

// String names the roles, for messages and the docs' table.
func (p Permission) String() string {
	if p&Anyone != 0 {
		return "anyone"
	}
	var rs []string
	for _, r := range Roles {
		if p.allows(r) {
			rs = append(rs, string(r))
		}
	}
	if len(rs) == 0 {
		return "nobody"
	}
	return strings.Join(rs, ", ")
}

// The one table of who may call what, on every server. A method is looked
// up by its full name first, then by its gRPC service; a method found in
// neither is refused to everyone (PermissionDenied). Services whose methods
// all need the same role are listed whole, so that a method added to the
// shard API is internal-only from the start.
var (
	services = map[string]Permission{
		// The shard API: counters, hand-offs, drops. Only routers and the
		// rebalance job.
		"shardlimit.v1.Shard": Internal,
		// The rebalance leader's API: routers forward operators' Admin
		// calls to it; operators may call it directly.
		"shardlimit.v1.Rebalancer": Internal | Operator,
		// Health's streams and listings (Watch, List) hold a goroutine and
		// a stream per call, or answer every service's status: only known
		// callers (gRPC clients' own health checking of a server they call
		// uses Watch, and they hold credentials). Check is open: see
		// methods.
		"grpc.health.v1.Health": Service | Operator | Internal,
		// Reflection describes the API (grpcurl needs it); only to known
		// callers.
		"grpc.reflection.v1.ServerReflection":      Service | Operator | Internal,
		"grpc.reflection.v1alpha.ServerReflection": Service | Operator | Internal,
	}
	methods = map[string]Permission{
		// The one method open to anyone: a unary Check answers SERVING or
		// not and nothing else, and load balancers and probes (Kubernetes'
		// grpc probes call Check) carry no credentials. See "What an
		// anonymous caller reaches" in doc.go.
		"/grpc.health.v1.Health/Check": Anyone,
		// The public API and Envoy's: a service for its own services; an
		// operator for any.
		"/shardlimit.v1.RateLimiter/Check":                             Service | Operator,
		"/shardlimit.v1.RateLimiter/CheckStream":                       Service | Operator,
		"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit": Service | Operator,
		"/shardlimit.v1.Admin/ListLimited":                             Service | Operator,
		"/shardlimit.v1.Admin/ListMembers":                             Service | Operator, // hot keys of the caller's services only
		"/shardlimit.v1.Admin/ApplyRules":                              Operator,
		"/shardlimit.v1.Admin/GetRules":                                Operator,
		"/shardlimit.v1.Admin/DeleteRule":                              Operator,
		"/shardlimit.v1.Admin/RebalancePlan":                           Operator,
		"/shardlimit.v1.Admin/RebalanceRun":                            Operator,
		"/shardlimit.v1.Admin/RebalanceRunStream":                      Operator,
		"/shardlimit.v1.Admin/WatchRebalanceRun":                       Operator,
		"/shardlimit.v1.Admin/ShardMapHistory":                         Operator,
		"/shardlimit.v1.Admin/RebalanceRuns":                           Operator,
		"/shardlimit.v1.Admin/ResetKey":                                Operator,
		"/shardlimit.v1.Admin/ListGrants":                              Operator,
		"/shardlimit.v1.Admin/Grant":                                   Operator,
		"/shardlimit.v1.Admin/Revoke":                                  Operator,
		"/shardlimit.v1.Admin/CreateToken":                             Operator,
	}
)

// PermissionOf returns who may call fullMethod ("/pkg.Service/Method") and
// its gRPC service's name, or ok false when the table does not know it.
func PermissionOf(fullMethod string) (p Permission, service string, ok bool) {
	service = serviceOf(fullMethod)
	if p, ok := methods[fullMethod]; ok {
		return p, service, true
	}
	if p, ok := services[service]; ok {
		return p, service, true
	}
	return 0, service, false
}

// serviceOf returns the gRPC service of "/pkg.Service/Method".
func serviceOf(fullMethod string) string {
	s := strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}
