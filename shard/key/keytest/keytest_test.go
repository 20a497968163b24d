package keytest

import (
	"strings"
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

// Users from every part of the range (each lane's pair varied), of any
// salt and of the longest names, are distinct, printable after the salt,
// and share one placement hash, so one partition; another salt makes
// other users.
func TestCollidingRange(t *testing.T) {
	long := strings.Repeat("s", key.MaxServiceLength)
	for _, tc := range []struct{ svc, rule, salt string }{
		{"shop", "shop-per-user", ""},
		{"shop", "shop-per-user", "flood-1x2y3z-"},
		{long, strings.Repeat("r", key.MaxRuleLength), "salt"},
	} {
		c := NewColliding(tc.svc, tc.rule, tc.salt)
		want := key.Hash(tc.svc, tc.rule, c.User(0))
		seen := map[string]bool{}
		const step = 1<<(lanes*laneBits)/1000 + 1 // odd multiples reach every lane's pairs
		for n := range uint64(1999) {             // 0..999, then 999 spread over the range
			i := n
			if n >= 1000 {
				i = (n - 999) * step
			}
			u := c.User(i)
			if seen[u] {
				t.Fatalf("%s: user %d repeated", tc.salt, i)
			}
			seen[u] = true
			if h := key.Hash(tc.svc, tc.rule, u); h != want {
				t.Fatalf("%s: user %d hash %x, user 0's %x", tc.salt, i, h, want)
			}
			if !strings.HasPrefix(u, tc.salt) || strings.Trim(u[len(tc.salt):], Alphabet) != "" {
				t.Fatalf("%s: user %d %q: not the salt then printable ASCII", tc.salt, i, u)
			}
			if n := len(key.Append(nil, tc.svc, tc.rule, u)); n%stripe != 0 {
				t.Fatalf("%s: key of %d bytes ends inside a stripe", tc.salt, n)
			}
		}
		if last := c.User(c.Len() - 1); seen[last] || key.Hash(tc.svc, tc.rule, last) != want {
			t.Fatalf("%s: the last user repeats or is placed apart", tc.salt)
		}
	}
	if a, b := NewColliding("shop", "r", "1").User(0), NewColliding("shop", "r", "2").User(0); a[1:] == b[1:] {
		t.Fatalf("salts 1 and 2 make the same user after the salt: %q", a)
	}
}

func TestUserPastLenPanics(t *testing.T) {
	c := NewColliding("svc", "r", "")
	defer func() {
		if recover() == nil {
			t.Fatal("User(Len()) did not panic")
		}
	}()
	c.User(c.Len())
}

// BenchmarkNewColliding is the cost of a flood's set-up: the audit of
// issue 23 made 60,000 users in 0.2 s.
func BenchmarkNewColliding(b *testing.B) {
	for b.Loop() {
		NewColliding("shop", "shop-per-user", "flood-")
	}
}

func BenchmarkUser(b *testing.B) {
	c := NewColliding("shop", "shop-per-user", "flood-")
	var buf []byte
	var i uint64
	for b.Loop() {
		buf = c.AppendUser(buf[:0], i%c.Len())
		i += 9973
	}
}
