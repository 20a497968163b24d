//go:build !linux

package redial

import "time"

// setUnackedTimeout does nothing where TCP_USER_TIMEOUT is not known: a
// cut-off peer's connection then lives until TCP gives up.
func setUnackedTimeout(int, time.Duration) error { return nil }
