package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeFlag is a flag of a size in bytes, written as a number of bytes or
// with a unit: 512MiB, 1.5GiB, 64MB, 4Mi (binary units KiB, MiB, GiB, TiB,
// also as Ki, Mi, Gi, Ti; decimal kB, MB, GB, TB; B; case-insensitive).
type sizeFlag[T int | int64] struct{ p *T }

func newSizeFlag[T int | int64](p *T) sizeFlag[T] { return sizeFlag[T]{p} }

func (f sizeFlag[T]) String() string {
	if f.p == nil {
		return "0"
	}
	return formatSize(int64(*f.p))
}

func (f sizeFlag[T]) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n {
		return fmt.Errorf("%q is too large", s)
	}
	*f.p = T(n)
	return nil
}

func (f sizeFlag[T]) Type() string { return "size" }

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize parses a size in bytes (see sizeFlag), rounding down to a
// whole byte.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a size like 1048576, 512MiB or 1.5GiB", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

// formatSize writes n in the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
