//go:build !linux

package events

import (
	"fmt"
	"runtime"
)

// Counter counts TCP state changes; on this system it cannot be opened.
type Counter struct{}

// Open fails: the tracepoint program needs Linux.
func Open(remotePorts ...uint16) (*Counter, error) {
	return nil, fmt.Errorf("%w: needs Linux, and this is %s", ErrUnavailable, runtime.GOOS)
}

// Read returns no counts.
func (c *Counter) Read() (Counts, error) { return Counts{}, ErrUnavailable }

// Close does nothing.
func (c *Counter) Close() error { return nil }
