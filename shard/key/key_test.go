package key

import (
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The hashes are part of the wire and storage contract: a key hashed by one
// process must land on the same partition and stored key in every other.
// These values pin them; changing them moves every counter.
func TestKeyIsStableAcrossProcesses(t *testing.T) {
	k := Make("shop", "per-user", "alice")
	if k.Hi != Hash("shop", "per-user", "alice") || k.Lo != Lo("shop", "per-user", "alice") {
		t.Fatalf("Make %x, Hash %x, Lo %x disagree", k, Hash("shop", "per-user", "alice"), Lo("shop", "per-user", "alice"))
	}
	if want := (Key{Hi: 0x476b64bfcc0225f, Lo: 0x865aadfa4313cff3}); k != want {
		t.Fatalf("Make = %#x, want %#x: every stored counter would move", k, want)
	}
}

func TestLongKeysHashLikeShortOnes(t *testing.T) {
	// Above the stack buffer the key is hashed by streaming: the value must
	// not change with the path taken.
	long := strings.Repeat("u", maxStackKey)
	k := Make("shop", "r", long)
	if k.Hi != Hash("shop", "r", long) || k.Lo != Lo("shop", "r", long) {
		t.Fatal("streamed and buffered hashes disagree")
	}
	short := Make("shop", "r", "u")
	if short == k {
		t.Fatal("different keys hashed alike")
	}
}

func TestEncodingIsUnambiguous(t *testing.T) {
	if Make("a", "bc", "d") == Make("ab", "c", "d") || Make("a", "b", "cd") == Make("a", "bc", "d") {
		t.Fatal("moving a byte across a separator gave the same key")
	}
}

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		hash uint64
		n    int
		want int
	}{{0, 1, 0}, {5, 4, 1}, {1<<64 - 1, 1024, 1023}, {1 << 63, 3, int((1 << 63) % 3)}} {
		if got := Partition(tc.hash, tc.n); got != tc.want {
			t.Errorf("Partition(%d, %d) = %d, want %d", tc.hash, tc.n, got, tc.want)
		}
	}
	if k := Make("s", "r", "u"); k.Partition(1024) != Partition(k.Hi, 1024) {
		t.Fatal("Key.Partition disagrees with Partition")
	}
}

// The stack and streaming paths agree with a plain streamed hash, and Hash
// and Lo are Make's halves, for users on both sides of the stack buffer.
func TestMakeAgreesWithStreamedHash(t *testing.T) {
	for _, user := range []string{"", "alice", string(make([]byte, 120)), string(make([]byte, 400)), string(make([]byte, 4000))} {
		k := Make("svc", "rule", user)
		var h1, h2 xxhash.Digest
		h1.Reset()
		writeKey(&h1, "svc", "rule", user)
		h2.ResetWithSeed(loSeed)
		writeKey(&h2, "svc", "rule", user)
		if k.Hi != h1.Sum64() || k.Lo != h2.Sum64() || Hash("svc", "rule", user) != k.Hi || Lo("svc", "rule", user) != k.Lo {
			t.Fatalf("user of %d bytes: keys differ", len(user))
		}
	}
}

// sum64 is the Digest's hash with a seed, at every length around its
// block and lane boundaries.
func TestSum64IsTheSeededDigest(t *testing.T) {
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	for _, seed := range []uint64{0, loSeed, 1<<64 - 1} {
		for n := range len(b) {
			var d xxhash.Digest
			d.ResetWithSeed(seed)
			_, _ = d.Write(b[:n])
			if got, want := sum64(b[:n], seed), d.Sum64(); got != want {
				t.Fatalf("seed %#x, %d bytes: %#x, want %#x", seed, n, got, want)
			}
		}
	}
	if sum64(b[:40], 0) != xxhash.Sum64(b[:40]) {
		t.Fatal("seed 0 differs from xxhash.Sum64")
	}
}

func BenchmarkLo(b *testing.B) {
	for range b.N {
		Lo("shop", "per-user", "user-123456")
	}
}
