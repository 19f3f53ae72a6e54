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
package events

import "errors"

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
