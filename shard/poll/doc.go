// Package poll waits for a condition instead of for a while: Until calls a
// check until it passes or a deadline ends. Tests use it so that a loaded
// machine makes them slower, never wrong.
//
// It is a leaf with no shardlimit imports; only tests import it.
package poll
