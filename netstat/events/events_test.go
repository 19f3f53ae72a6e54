package events

import (
	"errors"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/sockettest"
)

// Kernel TCP states, as include/net/tcp_states.h numbers them.
const (
	established = 1
	finWait1    = 4
	closeState  = 7
	closeWait   = 8
	lastAck     = 9
	listen      = 10
)

func TestTouching(t *testing.T) {
	var c Counts
	c[established*States+closeWait] = 3 // peer's FIN
	c[closeWait*States+lastAck] = 2     // our close
	c[closeState*States+listen] = 5     // a listener
	for _, tc := range []struct {
		mask uint32
		want uint64
	}{
		{0, 0},
		{1 << closeWait, 5},
		{1 << established, 3},
		{1<<closeWait | 1<<established, 5},
		{1 << listen, 5},
		{1 << finWait1, 0},
		{1<<lastAck | 1<<listen, 7},
		{^uint32(0), 10},
	} {
		if got := c.Touching(tc.mask); got != tc.want {
			t.Errorf("Touching(%#x) = %d, want %d", tc.mask, got, tc.want)
		}
	}
}

// open returns a Counter, or skips where the kernel does not allow one (not
// root, no BPF): the one case the test cannot check.
// With ports, the plain program must load first: a filtered one that the
// verifier rejects where the plain one loads is a bug, not a skip.
func open(t *testing.T, remotePorts ...uint16) *Counter {
	t.Helper()
	c, err := Open()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("events unavailable here: %v", err)
	}
	if err != nil {
		t.Fatalf("Open: %v (want nil or ErrUnavailable)", err)
	}
	if len(remotePorts) > 0 {
		c.Close()
		if c, err = Open(remotePorts...); err != nil {
			t.Fatalf("Open(%v): %v, where Open() works", remotePorts, err)
		}
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// TestCounterSeesCloseWait makes real CLOSE_WAIT sockets on loopback and
// checks that the counter saw each ESTABLISHED -> CLOSE_WAIT change, and
// each CLOSE_WAIT -> LAST_ACK when they are closed. Other tests' sockets may
// add to the counts (the tracepoint is host-wide), never take from them.
func TestCounterSeesCloseWait(t *testing.T) {
	c := open(t)
	read := func() Counts {
		t.Helper()
		n, err := c.Read()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// waitFor polls until counts[old][new] grew by at least k since base:
	// the tracepoint runs in the softirq that handles the FIN, which on
	// loopback has run before CloseWait returns, but polling costs nothing.
	waitFor := func(base Counts, old, nw int, k uint64) {
		t.Helper()
		i := old*States + nw
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := read()[i] - base[i]
			if got >= k {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("counts[%d][%d] grew by %d, want at least %d", old, nw, got, k)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	base := read()
	cw := append(sockettest.CloseWait(t, "tcp4", 3), sockettest.CloseWait(t, "tcp6", 2)...)
	waitFor(base, established, closeWait, 5)
	after := read()
	if after.Touching(1<<closeWait) < base.Touching(1<<closeWait)+5 {
		t.Errorf("Touching(CLOSE_WAIT) went %d -> %d, want at least +5", base.Touching(1<<closeWait), after.Touching(1<<closeWait))
	}

	for _, s := range cw {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(after, closeWait, lastAck, 5)
}

// TestCountersAreIndependent checks that two Counters each count from
// their own Open: a watch started after another does not inherit counts.
func TestCountersAreIndependent(t *testing.T) {
	first := open(t)
	sockettest.CloseWait(t, "tcp4", 2)
	second := open(t)
	// The later counter is read first: whatever it counted, the earlier
	// one, read after it, counted too.
	b, err := second.Read()
	if err != nil {
		t.Fatal(err)
	}
	a, err := first.Read()
	if err != nil {
		t.Fatal(err)
	}
	i := established*States + closeWait
	if a[i] < 2 {
		t.Errorf("first counter: %d ESTABLISHED -> CLOSE_WAIT, want at least 2", a[i])
	}
	if b[i] > a[i] {
		t.Errorf("second counter, opened later, counted %d, more than the first's %d", b[i], a[i])
	}
}

// TestCounterFiltersRemotePorts checks that a Counter opened with remote
// ports counts the changes of sockets to those ports and no others: two
// sets of CLOSE_WAIT sockets, each to its own listener, are closed, and
// only the closes of the set whose port was given are counted.
func TestCounterFiltersRemotePorts(t *testing.T) {
	want := sockettest.CloseWait(t, "tcp4", 3)
	other := append(sockettest.CloseWait(t, "tcp4", 2), sockettest.CloseWait(t, "tcp6", 2)...)
	port := want[0].Remote.Port()
	for _, s := range other {
		if s.Remote.Port() == port {
			t.Skipf("two listeners on port %d: the test needs distinct ones", port)
		}
	}
	c := open(t, port)
	base, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(other, want...) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	i := closeWait*States + lastAck
	deadline := time.Now().Add(5 * time.Second)
	var got uint64
	for {
		n, err := c.Read()
		if err != nil {
			t.Fatal(err)
		}
		if got = n[i] - base[i]; got >= uint64(len(want)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Exactly: the other sockets' closes, made first, were not counted.
	// (Another test's socket would need a remote port of this test's
	// listener to add to it.)
	if got != uint64(len(want)) {
		t.Errorf("CLOSE_WAIT -> LAST_ACK counted %d times, want %d (the closes to port %d only)", got, len(want), port)
	}
}

// TestCounterLeavesOutExcept: a counter opened with OpenExcept, beside a
// plain one, counts the closes of CLOSE_WAIT sockets to another port and
// not those to the excepted one (their remote port): over the same time,
// the plain one counts at least those more.
func TestCounterLeavesOutExcept(t *testing.T) {
	left := sockettest.CloseWait(t, "tcp4", 2)
	counted := sockettest.CloseWait(t, "tcp4", 3)
	except := left[0].Remote.Port()
	if counted[0].Remote.Port() == except {
		t.Skip("one listener for both: the test needs two")
	}
	plain := open(t)
	c, err := OpenExcept(except)
	if err != nil {
		t.Fatalf("OpenExcept: %v, where Open works", err)
	}
	defer c.Close()
	i := closeWait*States + lastAck
	read := func(c *Counter) uint64 {
		n, err := c.Read()
		if err != nil {
			t.Fatal(err)
		}
		return n[i]
	}
	base, plainBase := read(c), read(plain)
	for _, s := range append(left, counted...) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for read(plain)-plainBase < uint64(len(left)+len(counted)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got, all := read(c)-base, read(plain)-plainBase
	if got < uint64(len(counted)) {
		t.Errorf("CLOSE_WAIT -> LAST_ACK counted %d times, want at least the %d to port %d", got, len(counted), counted[0].Remote.Port())
	}
	if all < got+uint64(len(left)) {
		t.Errorf("counted %d closes, the plain counter %d: the %d to port %d were not left out", got, all, len(left), except)
	}
}
