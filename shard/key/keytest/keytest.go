package keytest

import (
	"encoding/binary"
	"math/bits"
	"strings"

	"github.com/shardlimit/shardlimit/shard/key"
)

// CollidingUsers returns n distinct users of service svc and rule r whose
// keys share one placement hash (key.Hash, XXH64 with seed 0), as the
// audit of issue 23 made them: XXH64's first lane takes the 8-byte words at
// offsets 32 and 64 of the key in consecutive rounds, round(round(v, x),
// y), and for any x there is a y that brings the lane to one chosen value.
// Every other byte is the same. The difference cancels for the other
// seed too but for a few carries, so most of these users also share the
// whole 128-bit key.Make: before issue 23, their counter.
func CollidingUsers(svc, r string, n int) []string {
	var p1, p2 uint64 = 11400714785074694791, 14029467366897019727 // XXH64's primes
	round := func(acc, in uint64) uint64 { return bits.RotateLeft64(acc+in*p2, 31) * p1 }
	inv := p2 // p2's inverse mod 2^64, by Newton's iteration
	for range 6 {
		inv *= 2 - p2*inv
	}
	prefix := svc + "\x00" + r + "\x00"
	if len(prefix) > 24 {
		panic("keytest.CollidingUsers: service and rule over 22 bytes")
	}
	head := prefix + strings.Repeat("a", 32-len(prefix))
	v := round(p1+p2, binary.LittleEndian.Uint64([]byte(head[:8])))
	const target = 0x5eed
	out := make([]string, n)
	var b []byte
	for i := range out {
		x := uint64(i) + 1
		y := (target - round(v, x)) * inv
		b = append(b[:0], head[len(prefix):]...)
		b = binary.LittleEndian.AppendUint64(b, x)
		b = append(b, strings.Repeat("b", 24)...)
		b = binary.LittleEndian.AppendUint64(b, y)
		b = append(b, "-flood-fills-the-stripe-"...) // y's stripe whole: a lane round, not the tail
		out[i] = string(b)
	}
	return out
}

// SameMake returns two distinct users of service svc and rule r whose
// whole 128-bit keys (key.Make) are equal.
func SameMake(svc, r string) (victim, attacker string) {
	seen := map[key.Key]string{}
	for _, u := range CollidingUsers(svc, r, 100) {
		k := key.Make(svc, r, u)
		if v, ok := seen[k]; ok {
			return v, u
		}
		seen[k] = u
	}
	panic("keytest.SameMake: no two users share key.Make")
}
