package mapstore

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// FuzzDecode feeds arbitrary stored maps to the path every router takes:
// decode, Validate against the partition count in use, then Resolve over
// the live members. Nothing panics, and a map that passes leaves every
// partition owned by a live member.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"partitions":8,"owners":["s1","","s2","","","","","s9"]}`))
	f.Add([]byte(`{"version":2,"partitions":8,"owners":["","","","","","","",""],"moves":[{"partition":9,"from":"x","to":"y"}]}`))
	f.Add([]byte(`{"version":0,"partitions":-1,"owners":null}`))
	f.Add([]byte(`{"version":1,"partitions":8,"owners":["s1"]}`))
	f.Add([]byte(`[]`))
	cfg := shardmap.Config{Partitions: 8, ReplicationFactor: 10, Load: 1.25}
	var members []member.Member
	for i := range 3 {
		members = append(members, member.Member{ID: fmt.Sprintf("s%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i)})
	}
	ring, err := shardmap.Build(cfg, members)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(&mvccpb.KeyValue{Key: []byte("/shardlimit/shardmap"), Value: b})
		if err != nil || m.Validate(cfg.Partitions) != nil {
			return
		}
		table := shardmap.Resolve(ring, m)
		for p := range table.Partitions() {
			if _, ok := table.Owner(p); !ok {
				t.Fatalf("partition %d has no live owner after map %s", p, b)
			}
		}
	})
}
