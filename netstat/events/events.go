// Package events counts TCP state changes as the kernel makes them, through
// the inet_sock_set_state tracepoint, so that a repeated scan can tell that
// nothing it watches has changed state since its last dump and skip the
// dump. It is the event source behind `kdiag watch --events`.
//
// The kernel calls the tracepoint from tcp_set_state (and inet_sk_set_state)
// for every state change of a full TCP socket: ESTABLISHED to CLOSE_WAIT when
// the peer's FIN arrives, CLOSE_WAIT to LAST_ACK when the application
// closes, SYN_SENT to ESTABLISHED, and so on. A counter that has not moved
// therefore means no socket entered or left a state. It does not see
// TIME_WAIT (the kernel replaces the socket by a timewait socket without a
// state change of its own) nor request sockets (NEW_SYN_RECV), so a scan of
// those states cannot be gated by it.
//
// The same program also records two transitions of each socket, with the
// kernel's time and the socket's identity, for Counter.Transitions: into
// CLOSE_WAIT from ESTABLISHED (the peer's FIN: the exact start of a
// CLOSE_WAIT, which tcp_info cannot give once a keepalive ACK has arrived)
// and out of CLOSE_WAIT to CLOSE (a reset: the keepalive probe answered by
// an RST once the peer's FIN_WAIT_2 has expired, or a close with unread
// data), after which the socket is in no kernel table while its process may
// still hold the fd. The records go through a BPF ring buffer (Linux 5.8)
// of RingCapacity records, which Transitions drains; what does not fit is
// counted (Dropped), never blocks the kernel, and costs no memory beyond
// the ring.
//
// The tracepoint fires for every network namespace, so transitions come
// from all of them and carry no namespace: a 4-tuple is unique only within
// one, Sock and Cookie on the whole host. It also fires for SCTP sockets,
// whose states reuse TCP's numbers (SCTP_SS_CLOSING is TCP_CLOSE_WAIT);
// telling them apart needs sk_protocol, whose offset in struct sock
// depends on the kernel's configuration, so an SCTP association closed by
// its peer is recorded like a TCP socket (Kafka clients do not use SCTP).
package events

import (
	"errors"
	"net/netip"
	"time"
)

// ErrUnavailable is wrapped by Open's error when this system cannot attach
// the program: not Linux, no permission (CAP_BPF and CAP_PERFMON, or root),
// or a kernel without BPF raw tracepoints.
var ErrUnavailable = errors.New("TCP state-change events unavailable")

// States is the number of TCP states the counters distinguish: the kernel's
// TCP_ESTABLISHED (1) to TCP_NEW_SYN_RECV (12) and TCP_BOUND_INACTIVE (13)
// fit in 4 bits.
const States = 16

// Counts holds, for each (old, new) state pair, how many changes the kernel
// made since the Counter was opened: Counts[old*States+new].
type Counts [States * States]uint64

// Touching returns how many changes left or entered a state in mask (bit s
// set for state s, as netstat.StateSet).
func (c *Counts) Touching(mask uint32) uint64 {
	var n uint64
	for old := range States {
		for nw := range States {
			if mask&(1<<old|1<<nw) != 0 {
				n += c[old*States+nw]
			}
		}
	}
	return n
}

// Address families as Linux numbers them (include/linux/socket.h), whatever
// the system this is built for: Transition.Family holds the kernel's value.
const (
	AFInet  = 2
	AFInet6 = 10
)

// Transition is one TCP state change of one socket, as the
// inet_sock_set_state tracepoint saw it: ESTABLISHED -> CLOSE_WAIT or
// CLOSE_WAIT -> CLOSE (the kernel's numbers, include/net/tcp_states.h).
type Transition struct {
	// Family is the socket's skc_family: AFInet or AFInet6. An AF_INET6
	// socket connected to an IPv4 peer has v4-mapped addresses
	// (::ffff:a.b.c.d), as inet_diag reports them.
	Family uint8
	// Local and Remote are the socket's addresses (skc_rcv_saddr, skc_num;
	// skc_daddr, skc_dport). On the way to CLOSE the kernel has already
	// released the local port (tcp_set_state unhashes the socket and
	// inet_put_port zeroes inet_num before the tracepoint fires), so a
	// CLOSE's Local port is 0 unless the application bound the port
	// itself: join it to the socket's CLOSE_WAIT transition by Sock.
	//
	// For AF_INET6 the addresses are read at an offset Open finds on the
	// running kernel (see Counter.IPv6); where it could not, the
	// addresses of an AF_INET6 socket are invalid (the zero netip.Addr),
	// its ports still set.
	Local, Remote netip.AddrPort
	// Old and New are the states before and after the change.
	Old, New uint8
	// At is when the kernel made the change: bpf_ktime_get_ns
	// (CLOCK_MONOTONIC) converted to wall time with the offset measured
	// at Open (to within microseconds). It carries a monotonic reading,
	// so it compares exactly with time.Now in this process; its wall
	// time does not follow a step of the system clock after Open.
	At time.Time
	// Sock is the address of the kernel's struct sock: an opaque id that
	// is the same for every transition of one socket, and that the kernel
	// may give to a new socket once this one is freed. A CLOSE_WAIT ->
	// CLOSE belongs with the latest ESTABLISHED -> CLOSE_WAIT of the same
	// Sock and remote address.
	Sock uint64
	// Cookie is the socket's skc_cookie: the number inet_diag reports as
	// idiag_cookie and getsockopt(SO_COOKIE) returns, unique on the host
	// and never reused. The kernel gives a socket its cookie the first
	// time one is asked for (an inet_diag dump that includes the socket
	// does), so it is 0 for a socket nothing has asked about yet: a
	// CLOSE_WAIT -> CLOSE of a socket that a scan saw in CLOSE_WAIT
	// carries the cookie that scan reported. 0 also where Open could not
	// find skc_cookie's offset (Counter.IPv6 says why).
	Cookie uint64
}
