package admin

import (
	"context"
	"errors"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
)

// grantInfo is a grant as the Admin API lists it: its id naming its kind,
// tokens by id only.
func grantInfo(g *auth.Grant, source string) *shardlimitv1.GrantInfo {
	out := &shardlimitv1.GrantInfo{Id: auth.CanonicalID(g.ID), Role: string(g.Role), Services: g.Services, Source: source}
	for i := range g.Tokens {
		out.Tokens = append(out.Tokens, tokenInfo(&g.Tokens[i]))
	}
	return out
}

func tokenInfo(t *auth.Token) *shardlimitv1.TokenInfo {
	info := &shardlimitv1.TokenInfo{Id: t.ID, CreatedUnixNs: t.Created.UnixNano()}
	if !t.Expires.IsZero() {
		info.ExpiresUnixNs = t.Expires.UnixNano()
	}
	return info
}

// inFile reports whether this router's grants file grants id: such a grant
// wins over a stored one, so storing one would change nothing.
func (a *admin) inFile(id string) error {
	cid := auth.CanonicalID(id)
	if slices.ContainsFunc(a.grants, func(g auth.Grant) bool { return auth.CanonicalID(g.ID) == cid }) {
		return status.Error(codes.FailedPrecondition, "id: granted by the routers' grants file, which wins over etcd: edit the file instead")
	}
	return nil
}

// grantStatus maps grantstore's errors to gRPC status codes.
func grantStatus(err error) error {
	switch {
	case errors.Is(err, auth.ErrInvalidGrant):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, grantstore.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, grantstore.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case status.Code(err) != codes.Unknown:
		return err
	}
	return status.Errorf(codes.Unavailable, "etcd: %v", err)
}

func (a *admin) ListGrants(ctx context.Context, _ *shardlimitv1.ListGrantsRequest) (*shardlimitv1.ListGrantsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	entries, invalid, rev, err := grantstore.List(ctx, a.etcd, a.layout)
	if err != nil {
		return nil, grantStatus(err)
	}
	resp := &shardlimitv1.ListGrantsResponse{Revision: rev}
	for i := range a.grants {
		resp.Grants = append(resp.Grants, grantInfo(&a.grants[i], "file"))
	}
	for _, e := range entries {
		if a.inFile(e.Grant.ID) == nil { // the file's grant wins
			resp.Grants = append(resp.Grants, grantInfo(&e.Grant, "etcd"))
		}
	}
	slices.SortFunc(resp.Grants, func(x, y *shardlimitv1.GrantInfo) int {
		switch {
		case x.Id < y.Id:
			return -1
		case x.Id > y.Id:
			return 1
		}
		return 0
	})
	for _, in := range invalid {
		resp.Invalid = append(resp.Invalid, in.Key)
	}
	return resp, nil
}

// Grant stores a grant. Its id must name its kind (uri:, dns:, token:), and
// its role may not be internal: only the components' grants files grant
// that (grantstore.ErrInternalInEtcd).
func (a *admin) Grant(ctx context.Context, req *shardlimitv1.GrantRequest) (*shardlimitv1.GrantResponse, error) {
	if err := auth.CheckExplicitID(req.Id); err != nil {
		return nil, grantStatus(err)
	}
	if auth.Role(req.Role) == auth.RoleInternal {
		return nil, grantStatus(grantstore.ErrInternalInEtcd)
	}
	if err := a.inFile(req.Id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	var stored auth.Grant
	rev, err := grantstore.Modify(ctx, a.etcd, a.layout, req.Id, func(cur *auth.Grant) (grantstore.Change, error) {
		stored = auth.Grant{ID: auth.CanonicalID(req.Id), Role: auth.Role(req.Role), Services: req.Services}
		if cur != nil {
			stored.Tokens = cur.Tokens
		}
		return grantstore.Change{Grant: stored}, nil
	})
	if err != nil {
		return nil, grantStatus(err)
	}
	a.log.Info("grant stored", "id", stored.ID, "role", req.Role, "services", len(req.Services), "caller", auth.FromContext(ctx).Name())
	return &shardlimitv1.GrantResponse{Grant: grantInfo(&stored, "etcd"), Revision: rev}, nil
}

func (a *admin) Revoke(ctx context.Context, req *shardlimitv1.RevokeRequest) (*shardlimitv1.RevokeResponse, error) {
	if err := a.inFile(req.Id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	resp := &shardlimitv1.RevokeResponse{}
	rev, err := grantstore.Modify(ctx, a.etcd, a.layout, req.Id, func(cur *auth.Grant) (grantstore.Change, error) {
		resp.Existed, resp.Grant = cur != nil, nil
		if cur == nil {
			// An invalid stored value goes too.
			return grantstore.Change{Delete: true}, nil
		}
		g := *cur
		if len(req.Services) > 0 {
			g.Services = slices.DeleteFunc(slices.Clone(g.Services), func(s string) bool { return slices.Contains(req.Services, s) })
			if len(g.Services) == 0 {
				return grantstore.Change{}, status.Error(codes.FailedPrecondition, "services: the grant would hold none; revoke the whole grant instead")
			}
		}
		if req.TokenId != "" {
			n := len(g.Tokens)
			g.Tokens = slices.DeleteFunc(slices.Clone(g.Tokens), func(t auth.Token) bool { return t.ID == req.TokenId })
			if len(g.Tokens) == n {
				return grantstore.Change{}, status.Error(codes.NotFound, "token_id: the identity holds no such token")
			}
		}
		if len(req.Services) == 0 && req.TokenId == "" {
			return grantstore.Change{Delete: true}, nil
		}
		resp.Grant = grantInfo(&g, "etcd")
		return grantstore.Change{Grant: g}, nil
	})
	if err != nil {
		return nil, grantStatus(err)
	}
	resp.Revision = rev
	a.log.Info("grant revoked", "id", req.Id, "services", len(req.Services), "token_id", req.TokenId, "caller", auth.FromContext(ctx).Name())
	return resp, nil
}

func (a *admin) CreateToken(ctx context.Context, req *shardlimitv1.CreateTokenRequest) (*shardlimitv1.CreateTokenResponse, error) {
	if err := a.inFile(req.Id); err != nil {
		return nil, err
	}
	// Clamped so that no number of seconds overflows a Duration: out of
	// bounds stays out of bounds.
	ttl := time.Duration(min(max(req.TtlSeconds, -1), int64(auth.MaxTokenTTL/time.Second)+1)) * time.Second
	token, stored, err := auth.NewTokenTTL(time.Now(), ttl)
	switch {
	case errors.Is(err, auth.ErrInvalidGrant):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Errorf(codes.Internal, "random: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	rev, err := grantstore.Modify(ctx, a.etcd, a.layout, req.Id, func(cur *auth.Grant) (grantstore.Change, error) {
		if cur == nil {
			return grantstore.Change{}, status.Error(codes.NotFound, "id: no grant is stored for this identity: grant it a role first")
		}
		g := *cur
		g.Tokens = append(slices.Clone(g.Tokens), stored)
		return grantstore.Change{Grant: g}, nil
	})
	if err != nil {
		return nil, grantStatus(err)
	}
	// The token itself is never logged.
	a.log.Info("token created", "id", auth.CanonicalID(req.Id), "token_id", stored.ID, "expires", stored.Expires, "caller", auth.FromContext(ctx).Name())
	return &shardlimitv1.CreateTokenResponse{Token: token, Info: tokenInfo(&stored), Revision: rev}, nil
}
