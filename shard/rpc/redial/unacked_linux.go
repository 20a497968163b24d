package redial

import (
	"time"

	"golang.org/x/sys/unix"
)

// setUnackedTimeout sets fd's TCP_USER_TIMEOUT.
func setUnackedTimeout(fd int, d time.Duration) error {
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
}
