package key

import (
	"bytes"

	"github.com/cespare/xxhash/v2"
)

// Bounds on the names a key is made of, shared by rule validation, the
// router's request validation and the shard API.
const (
	// MaxServiceLength bounds a service name in bytes.
	MaxServiceLength = 128
	// MaxEndpointLength bounds an endpoint in bytes.
	MaxEndpointLength = 256
	// MaxRuleLength bounds a rule name in bytes.
	MaxRuleLength = 128
)

// Key is the 128-bit hash of a counter key: two xxhash64 sums with
// different seeds. Hi places the key on its partition; both halves are the
// same in every process. Neither identifies a counter: users that share
// either, or both, can be made at will (see package doc).
type Key struct{ Hi, Lo uint64 }

// loSeed is the seed of the second hash; any constant other than zero.
const loSeed = 0x9e3779b97f4a7c15

// maxStackKey is the longest key hashed from a stack buffer; longer keys
// (users over ~250 bytes) are hashed by streaming, a little slower.
// Keys up to shortKey bytes, nearly all, use a smaller buffer, cheaper to
// clear.
const (
	maxStackKey = 512
	shortKey    = 128
)

// Make hashes (service, rule, user) into a Key without allocating.
func Make(service, rule, user string) Key {
	switch n := len(service) + len(rule) + len(user) + 2; {
	case n <= shortKey:
		var buf [shortKey]byte
		b := appendKey(buf[:0], service, rule, user)
		return Key{Hi: xxhash.Sum64(b), Lo: sum64(b, loSeed)}
	case n <= maxStackKey:
		var buf [maxStackKey]byte
		b := appendKey(buf[:0], service, rule, user)
		return Key{Hi: xxhash.Sum64(b), Lo: sum64(b, loSeed)}
	}
	return Key{Hi: Hash(service, rule, user), Lo: Lo(service, rule, user)}
}

// Hash returns Make(service, rule, user).Hi, the hash that places a key on
// a partition, without computing Lo.
func Hash(service, rule, user string) uint64 {
	if n := len(service) + len(rule) + len(user) + 2; n <= maxStackKey {
		var buf [maxStackKey]byte
		return xxhash.Sum64(appendKey(buf[:0], service, rule, user))
	}
	var h xxhash.Digest
	h.Reset()
	writeKey(&h, service, rule, user)
	return h.Sum64()
}

// Lo returns Make(service, rule, user).Lo, for a shard that received Hi
// from the router and needs only the other half.
func Lo(service, rule, user string) uint64 {
	switch n := len(service) + len(rule) + len(user) + 2; {
	case n <= shortKey:
		var buf [shortKey]byte
		return sum64(appendKey(buf[:0], service, rule, user), loSeed)
	case n <= maxStackKey:
		var buf [maxStackKey]byte
		return sum64(appendKey(buf[:0], service, rule, user), loSeed)
	}
	var h xxhash.Digest
	h.ResetWithSeed(loSeed)
	writeKey(&h, service, rule, user)
	return h.Sum64()
}

// Partition returns the partition of a key among n partitions, given its
// placement hash (Key.Hi).
func Partition(hash uint64, n int) int { return int(hash % uint64(n)) }

// Partition returns the key's partition among n partitions.
func (k Key) Partition(n int) int { return Partition(k.Hi, n) }

// The key is service NUL rule NUL user; service and rule names cannot hold
// NUL, so the encoding is unambiguous.
func appendKey(b []byte, service, rule, user string) []byte {
	b = append(b, service...)
	b = append(b, 0)
	b = append(b, rule...)
	b = append(b, 0)
	return append(b, user...)
}

var sep = []byte{0}

func writeKey(h *xxhash.Digest, service, rule, user string) {
	_, _ = h.WriteString(service)
	_, _ = h.Write(sep)
	_, _ = h.WriteString(rule)
	_, _ = h.Write(sep)
	_, _ = h.WriteString(user)
}

// MaxUserLength bounds a user in bytes: the most any router may be set to
// accept (router Options.MaxUserLength).
const MaxUserLength = 4096

// MaxEncodedLength bounds an encoded key (Append) in bytes.
const MaxEncodedLength = MaxServiceLength + MaxRuleLength + MaxUserLength + 2

// Append appends the key's encoding, service NUL rule NUL user: the bytes
// that Hash and Make hash, and that a shard stores as the counter's
// identity.
func Append(b []byte, service, rule, user string) []byte { return appendKey(b, service, rule, user) }

// HashEncoded returns Hash of the key whose encoding (Append) is enc.
func HashEncoded(enc []byte) uint64 { return xxhash.Sum64(enc) }

// HashEncodedString is HashEncoded of an encoding held in a string.
func HashEncodedString(enc string) uint64 { return xxhash.Sum64String(enc) }

// MakeEncoded returns Make of the key whose encoding (Append) is enc.
func MakeEncoded(enc []byte) Key { return Key{Hi: xxhash.Sum64(enc), Lo: sum64(enc, loSeed)} }

// Split returns the names of an encoded key (Append), and false when enc
// is not one: without two NULs, or with a name over its bound. The user
// is what follows the second NUL, NULs included.
func Split(enc []byte) (service, rule, user string, ok bool) {
	i := bytes.IndexByte(enc, 0)
	if i < 0 {
		return "", "", "", false
	}
	j := bytes.IndexByte(enc[i+1:], 0)
	if j < 0 {
		return "", "", "", false
	}
	service, rule, user = string(enc[:i]), string(enc[i+1:i+1+j]), string(enc[i+2+j:])
	ok = len(service) <= MaxServiceLength && len(rule) <= MaxRuleLength && len(user) <= MaxUserLength
	return service, rule, user, ok
}
