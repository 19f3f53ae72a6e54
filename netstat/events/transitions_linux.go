package events

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// RingSize is the size of the ring buffer the program writes transition
// records into: 1 MiB, or RingCapacity records. The kernel keeps it in
// locked memory for the Counter's life. A watch that calls Transitions
// every few seconds loses none below about RingCapacity/interval
// passive closes a second toward the watched ports (every port without a
// filter); past that the program counts what it could not write (Dropped).
const RingSize = 1 << 20

// RingCapacity is how many transition records the ring holds: each takes
// its 80 bytes and the ring's 8-byte header.
const RingCapacity = RingSize / (recSize + 8)

// ringSize is RingSize but for tests, which overflow a smaller ring (a
// power of 2 and a multiple of the page size, as the kernel requires).
var ringSize uint32 = RingSize

// openTransitions makes what the program needs to record transitions: the
// ring buffer and its reader, the drop counter, the clock, and the offset
// of the IPv6 addresses. Its error (wrapping ErrUnavailable) is what
// Transitions returns from then on; the counting goes on without them.
func (c *Counter) openTransitions() error {
	var err error
	c.ring, err = newMap(&ebpf.MapSpec{
		Name:       "kdiag_tcp_trans",
		Type:       ebpf.RingBuf,
		MaxEntries: ringSize,
	})
	if err != nil {
		return unavailable("create the transitions' ring buffer (BPF_MAP_TYPE_RINGBUF, Linux 5.8)", err)
	}
	if c.reader, err = ringbuf.NewReader(c.ring); err != nil {
		c.closeTransitions()
		return unavailable("map the transitions' ring buffer", err)
	}
	c.drops, err = newMap(&ebpf.MapSpec{
		Name:       "kdiag_tcp_drops",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: 1,
	})
	if err != nil {
		c.closeTransitions()
		return unavailable("create the drop counter", err)
	}
	if c.clock, err = newClock(); err != nil {
		c.closeTransitions()
		return unavailable("read CLOCK_MONOTONIC", err)
	}
	c.v6, c.noIPv6 = findV6Offset()
	if errors.Is(c.noIPv6, errLayout) {
		c.closeTransitions()
		return fmt.Errorf("%w: transitions: %v", ErrUnavailable, c.noIPv6)
	}
	return nil
}

// closeTransitions frees what openTransitions made; the program that
// writes into the ring must be gone or never loaded.
func (c *Counter) closeTransitions() error {
	var errs []error
	if c.reader != nil {
		errs = append(errs, c.reader.Close())
	}
	if c.ring != nil {
		errs = append(errs, c.ring.Close())
	}
	if c.drops != nil {
		errs = append(errs, c.drops.Close())
	}
	c.reader, c.ring, c.drops = nil, nil, nil
	return errors.Join(errs...)
}

// newClock pairs a CLOCK_MONOTONIC reading with time.Now. Of a few tries
// it keeps the one whose two CLOCK_MONOTONIC readings around time.Now are
// closest (a preemption between them would skew the pair), and takes their
// middle: the pair is then within half that width, microseconds at most.
func newClock() (clock, error) {
	var best clock
	width := int64(math.MaxInt64)
	for range 5 {
		var a, b unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &a); err != nil {
			return clock{}, err
		}
		now := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &b); err != nil {
			return clock{}, err
		}
		if w := b.Nano() - a.Nano(); w < width {
			width = w
			best = clock{mono: a.Nano() + w/2, wall: now}
		}
	}
	return best, nil
}

// Transitions returns the transitions the kernel recorded since the last
// call (since Open for the first), oldest first: every ESTABLISHED ->
// CLOSE_WAIT and CLOSE_WAIT -> CLOSE of a socket the Counter's port filter
// lets through, up to RingCapacity per call (more wait for the next one).
// Those the ring had no room for are counted by Dropped. It does not
// block. The error wraps ErrUnavailable when this kernel cannot record
// transitions (see Open); a malformed record is skipped and reported in
// the error, the others returned.
func (c *Counter) Transitions() ([]Transition, error) {
	if c.reader == nil {
		return nil, c.transitionsErr()
	}
	// A deadline already passed makes the reader return what the ring
	// holds and then os.ErrDeadlineExceeded, without waiting.
	c.reader.SetDeadline(time.Unix(0, 1))
	var (
		out  []Transition
		rec  ringbuf.Record
		errs []error
	)
	for range c.reader.BufferSize() / (recSize + 8) {
		err := c.reader.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read TCP transitions: %w", err))
			break
		}
		t, err := parseRecord(rec.RawSample, c.clock, c.v6 > 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// Dropped returns how many transitions, since Open, the program could not
// hand to Transitions: the ring buffer was full (nothing drained it fast
// enough) or, which the kernel should never do, a read of the socket
// failed. A watch that sees it grow knows its transitions are incomplete.
func (c *Counter) Dropped() (uint64, error) {
	if c.drops == nil {
		return 0, c.transitionsErr()
	}
	var n uint64
	if err := c.drops.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("read dropped TCP transitions: %w", err)
	}
	return n, nil
}

// IPv6 returns nil when the transitions of AF_INET6 sockets carry their
// addresses, and otherwise why not. Their offsets in struct sock_common
// depend on the kernel's configuration (CONFIG_NET_NS adds a pointer
// before them, CONFIG_IPV6=n removes them) and word size, which a program
// without BTF cannot know: Open finds them on the running kernel instead
// (see findV6Offset).
func (c *Counter) IPv6() error {
	if c.reader == nil {
		return c.transitionsErr()
	}
	return c.noIPv6
}

// transitionsErr says why a Counter has no transitions.
func (c *Counter) transitionsErr() error {
	if c.noTransitions != nil {
		return c.noTransitions
	}
	return fmt.Errorf("%w: transitions: the Counter is closed", ErrUnavailable)
}
