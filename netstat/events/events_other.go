//go:build !linux

package events

import (
	"fmt"
	"runtime"
)

// Counter counts TCP state changes; on this system it cannot be opened.
type Counter struct{}

// RingSize and RingCapacity are the Linux ring buffer's size and record
// capacity; nothing uses them here.
const (
	RingSize     = 1 << 20
	RingCapacity = RingSize / (recSize + 8)
)

// Open fails: the tracepoint program needs Linux.
func Open(remotePorts ...uint16) (*Counter, error) {
	return nil, fmt.Errorf("%w: needs Linux, and this is %s", ErrUnavailable, runtime.GOOS)
}

// OpenExcept fails as Open does.
func OpenExcept(except uint16, remotePorts ...uint16) (*Counter, error) {
	return Open(remotePorts...)
}

// Read returns no counts.
func (c *Counter) Read() (Counts, error) { return Counts{}, ErrUnavailable }

// Transitions returns none.
func (c *Counter) Transitions() ([]Transition, error) { return nil, ErrUnavailable }

// Dropped returns 0.
func (c *Counter) Dropped() (uint64, error) { return 0, ErrUnavailable }

// IPv6 says there are no transitions.
func (c *Counter) IPv6() error { return ErrUnavailable }

// Close does nothing.
func (c *Counter) Close() error { return nil }
