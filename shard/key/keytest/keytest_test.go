package keytest

import (
	"testing"

	"github.com/shardlimit/shardlimit/shard/key"
)

// The users are distinct, share the placement hash, and two share Make.
func TestCollisions(t *testing.T) {
	us := CollidingUsers("svc", "r", 1000)
	seen := map[string]bool{}
	for _, u := range us {
		if seen[u] || key.Hash("svc", "r", u) != key.Hash("svc", "r", us[0]) {
			t.Fatalf("user %q repeated or placed apart", u)
		}
		seen[u] = true
	}
	v, a := SameMake("svc", "r")
	if v == a || key.Make("svc", "r", v) != key.Make("svc", "r", a) {
		t.Fatal("SameMake's users differ in Make")
	}
}
