package router

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/member"
)

// failingShard is a shard client whose Limited fails at once.
type failingShard struct{ shardlimitv1.ShardClient }

func (failingShard) Limited(context.Context, *shardlimitv1.LimitedRequest, ...grpc.CallOption) (*shardlimitv1.LimitedResponse, error) {
	return nil, errors.New("unreachable")
}

// ListLimited appended peers without a client to the answer outside the
// mutex its goroutines hold: -race reported it whenever a shard failed
// while another had no client.
func TestListLimitedCollectsUnreachableShardsWithoutARace(t *testing.T) {
	r := &Router{}
	r.routing.Store(&routing{peers: []*peer{
		{member: member.Member{ID: "a"}, client: failingShard{}},
		{member: member.Member{ID: "b"}}, // no client: could not be dialed
		{member: member.Member{ID: "c"}, client: failingShard{}},
		{member: member.Member{ID: "d"}},
	}})
	op := auth.NewSet([]auth.Grant{{ID: "op", Role: auth.RoleOperator}}).Lookup("op")
	resp, err := (&admin{r: r}).ListLimited(auth.NewContext(context.Background(), op), &shardlimitv1.ListLimitedRequest{Service: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.Unreachable); got != 4 || resp.Unreachable[0] != "a" || resp.Unreachable[3] != "d" {
		t.Fatalf("unreachable %v, want a b c d", resp.Unreachable)
	}
}
