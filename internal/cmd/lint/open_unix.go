//go:build unix

package lint

import (
	"os"
	"syscall"
)

// openNonBlock opens name for reading with O_NONBLOCK: open(2) on a FIFO
// with no writer returns at once instead of waiting for one. On a regular
// file the flag changes nothing (reads of regular files never block on it).
func openNonBlock(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
