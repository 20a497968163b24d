package deploy

import (
	"slices"
	"testing"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// The grants files of the manifests and of the Compose example are valid
// grants files, and grant the internal role to exactly the router, the
// rebalance job and the shards (which pull counters from each other), by
// the identities their certificates carry.
func TestGrantsFiles(t *testing.T) {
	for _, tc := range []struct {
		file     string
		services map[string][]string // service identities → their services
	}{
		{"k8s/base/grants.yaml", nil},
		{envoyGrantsFile, map[string][]string{"spiffe://shardlimit/envoy": {"edge"}}},
	} {
		gs, err := auth.ParseFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		var internal []string
		for _, g := range gs {
			switch g.Role {
			case auth.RoleInternal:
				internal = append(internal, g.ID)
			case auth.RoleOperator:
				if g.ID != creds.OperatorID {
					t.Errorf("%s: operator %s, want %s", tc.file, g.ID, creds.OperatorID)
				}
			case auth.RoleService:
				if want, ok := tc.services[g.ID]; !ok || !slices.Equal(g.Services, want) {
					t.Errorf("%s: %s holds %v, want %v", tc.file, g.ID, g.Services, want)
				}
			}
		}
		slices.Sort(internal)
		if want := []string{creds.RebalanceID, creds.RouterID, creds.ShardID}; !slices.Equal(internal, want) {
			t.Errorf("%s: internal identities %v, want %v", tc.file, internal, want)
		}
	}
}

// envoyGrantsFile is the grants file of the Compose example with TLS.
const envoyGrantsFile = "envoy/grants.yaml"
