package keytest

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"

	"github.com/shardlimit/shardlimit/shard/key"
)

// Alphabet holds the bytes of every user this package makes beyond the
// salt: printable ASCII but the space.
const Alphabet = `!"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_` + "`" + `abcdefghijklmnopqrstuvwxyz{|}~`

// The words of a user: each of XXH64's four lanes takes one of
// perLane (x, y) pairs, so a Colliding makes perLane^4 users.
const (
	lanes     = 4
	perLane   = 128
	laneBits  = 7 // log2(perLane)
	stripe    = 32
	padByte   = 'a'
	targetSum = 0x5eed // every pair brings its lane's sum before the last rotation to it
)

// XXH64's primes, and prime2's inverse mod 2^64.
const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
)

var prime2Inv = func() uint64 {
	inv := prime2 // Newton's iteration: each step doubles the correct low bits
	for range 6 {
		inv *= 2 - prime2*inv
	}
	return inv
}()

func round(acc, in uint64) uint64 { return bits.RotateLeft64(acc+in*prime2, 31) * prime1 }

// inAlphabet[b] is whether byte b is in Alphabet.
var inAlphabet = func() (t [256]bool) {
	for i := range len(Alphabet) {
		t[Alphabet[i]] = true
	}
	return t
}()

// Colliding makes distinct users of one service and rule whose keys share
// one placement hash (key.Hash, XXH64 with seed 0), printable, as the
// audit of issue 23 made them. A user is the salt, padding that ends the
// key's first stripes (the key's service NUL rule NUL salt, padded to a
// multiple of 32 bytes), then two stripes: four words x, one per XXH64
// lane, then four words y. Each lane takes its x and y in consecutive
// rounds, round(round(v, x), y), and for any x there is one y that
// brings the lane to one chosen state; the x whose y is in Alphabet are
// kept, perLane of them per lane. Any choice of pair per lane gives the
// same four lanes, so the same hash, and the key ends at a stripe's end,
// with no tail. The difference cancels for key.Make's other seed too but
// for a few carries, so many of these users also share the whole 128-bit
// key.Make: before issue 23, their counter.
//
// A Colliding is read-only once made: safe for concurrent use.
type Colliding struct {
	head  string                    // the user's bytes before the pairs
	pairs [lanes][perLane][2]uint64 // per lane, per choice: x, y
}

// NewColliding returns the users of service svc and rule r with the given
// salt: different salts make different users (with another shared hash).
// It takes a few tens of milliseconds.
func NewColliding(svc, r, salt string) *Colliding {
	prefix := svc + "\x00" + r + "\x00" + salt
	pad := (stripe - len(prefix)%stripe) % stripe
	head := prefix + strings.Repeat(string(rune(padByte)), pad)
	p1, p2 := prime1, prime2                // variables: the lanes' sums wrap
	v := [lanes]uint64{p1 + p2, p2, 0, -p1} // XXH64's lanes, seed 0
	for s := 0; s < len(head); s += stripe {
		for j := range v {
			v[j] = round(v[j], binary.LittleEndian.Uint64([]byte(head[s+8*j:])))
		}
	}
	c := &Colliding{head: head[len(svc)+len(r)+2:]}
	for j := range v {
		c.fill(j, v[j])
	}
	return c
}

// fill finds lane j's pairs from its state v: x runs over words of
// Alphabet in order, and y = (targetSum - round(v, x)) / prime2 is kept
// when it is in Alphabet too (about 1 x in 3,000).
func (c *Colliding) fill(j int, v uint64) {
	var digits [8]int // x's letters, little-endian, as an odometer
	x := binary.LittleEndian.Uint64([]byte(strings.Repeat(Alphabet[:1], 8)))
	for found := 0; found < perLane; {
		if y := (targetSum - round(v, x)) * prime2Inv; word(y) {
			c.pairs[j][found] = [2]uint64{x, y}
			found++
		}
		for i := range digits { // the next x
			digits[i]++
			if digits[i] < len(Alphabet) {
				x = x&^(0xff<<(8*i)) | uint64(Alphabet[digits[i]])<<(8*i)
				break
			}
			digits[i] = 0
			x = x&^(0xff<<(8*i)) | uint64(Alphabet[0])<<(8*i)
		}
	}
}

// word reports whether every byte of w is in Alphabet.
func word(w uint64) bool {
	for range 8 {
		if !inAlphabet[byte(w)] {
			return false
		}
		w >>= 8
	}
	return true
}

// Len is how many users c makes: User takes i in [0, Len).
func (c *Colliding) Len() uint64 { return 1 << (lanes * laneBits) }

// AppendUser appends user i's name to b. Users that differ in i differ;
// the first perLane differ in the first lane's pair only.
func (c *Colliding) AppendUser(b []byte, i uint64) []byte {
	if i >= c.Len() {
		panic(fmt.Sprintf("keytest.Colliding: user %d of %d", i, c.Len()))
	}
	b = append(b, c.head...)
	for half := range 2 {
		for j := range lanes {
			b = binary.LittleEndian.AppendUint64(b, c.pairs[j][i>>(j*laneBits)%perLane][half])
		}
	}
	return b
}

// User returns user i's name (see AppendUser).
func (c *Colliding) User(i uint64) string { return string(c.AppendUser(nil, i)) }

// CollidingUsers returns the first n users of NewColliding(svc, r, ""):
// distinct users of service svc and rule r whose keys share one placement
// hash.
func CollidingUsers(svc, r string, n int) []string {
	c := NewColliding(svc, r, "")
	out := make([]string, n)
	for i := range out {
		out[i] = c.User(uint64(i))
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
