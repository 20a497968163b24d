package rpctest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// NewAuthorizer returns an Authorizer, logging to log, that knows the
// local PKI's operator certificate and one service's token (service shop,
// the token returned), as the tests of a server's authentication bounds
// need.
func NewAuthorizer(tb testing.TB, log *slog.Logger) (*auth.Authorizer, string) {
	tb.Helper()
	a, err := auth.New(auth.Options{Component: "test", Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	token, stored, err := auth.NewToken(time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	a.SetGrants(auth.NewSet([]auth.Grant{
		{ID: creds.OperatorID, Role: auth.RoleOperator},
		{ID: "token:shop", Role: auth.RoleService, Services: []string{"shop"}, Tokens: []auth.Token{stored}},
	}), 0)
	return a, token
}
