package admin

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// failingShard is a shard client whose Limited fails at once.
type failingShard struct{ shardlimitv1.ShardClient }

func (failingShard) Limited(context.Context, *shardlimitv1.LimitedRequest, ...grpc.CallOption) (*shardlimitv1.LimitedResponse, error) {
	return nil, errors.New("unreachable")
}

// fakeRouter routes to shards, with no partition table.
type fakeRouter struct{ shards []Shard }

func (f fakeRouter) Routing() (*shardmap.Table, []Shard) { return nil, f.shards }
func (fakeRouter) MapVersion() int64                     { return 0 }
func (fakeRouter) ForgetKey(string, string, string)      {}

// ListLimited appended peers without a client to the answer outside the
// mutex its goroutines hold: -race reported it whenever a shard failed
// while another had no client.
func TestListLimitedCollectsUnreachableShardsWithoutARace(t *testing.T) {
	r := fakeRouter{shards: []Shard{
		{Member: member.Member{ID: "a"}, Client: failingShard{}},
		{Member: member.Member{ID: "b"}}, // no client: could not be dialed
		{Member: member.Member{ID: "c"}, Client: failingShard{}},
		{Member: member.Member{ID: "d"}},
	}}
	op := auth.NewSet([]auth.Grant{{ID: "op", Role: auth.RoleOperator}}).Lookup("op")
	resp, err := (&admin{r: r}).ListLimited(auth.NewContext(context.Background(), op), &shardlimitv1.ListLimitedRequest{Service: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.Unreachable); got != 4 || resp.Unreachable[0] != "a" || resp.Unreachable[3] != "d" {
		t.Fatalf("unreachable %v, want a b c d", resp.Unreachable)
	}
}
