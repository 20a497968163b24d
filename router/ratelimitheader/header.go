package ratelimitheader

import (
	"strconv"
	"strings"
)

// Field names.
const (
	PolicyField = "RateLimit-Policy"
	LimitField  = "RateLimit"
)

// MaxInteger is the largest RFC 9651 Integer; larger values are clamped.
const MaxInteger = 999_999_999_999_999

// Policy returns one RateLimit-Policy item: "name";q=quota;w=window, with w
// left out when window is 0 (seconds).
func Policy(name string, quota, window int64) string {
	s := String(name) + ";q=" + strconv.FormatInt(clamp(quota), 10)
	if window > 0 {
		s += ";w=" + strconv.FormatInt(clamp(window), 10)
	}
	return s
}

// Limit returns one RateLimit item: "name";r=remaining;t=seconds.
func Limit(name string, remaining, seconds int64) string {
	return String(name) + ";r=" + strconv.FormatInt(clamp(remaining), 10) + ";t=" + strconv.FormatInt(clamp(seconds), 10)
}

func clamp(n int64) int64 { return min(max(n, 0), MaxInteger) }

// String renders s as an RFC 9651 String: quoted, with '"' and '\'
// escaped. A String holds printable ASCII only, so any other byte becomes
// '?'.
func String(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
