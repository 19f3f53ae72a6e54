package producer

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed says whether the broker has closed its end of nc: the
// kernel has the broker's FIN and holds the socket in CLOSE_WAIT
// (tcp_info's tcpi_state, TCP_CLOSE_WAIT in include/net/tcp_states.h),
// whether or not anything read the EOF. A connection the producer closes
// in that state was closed by the broker first, even if no reader saw it
// (kdiag.reader=on-demand, or a callback blocking the network goroutine).
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var state uint8
	if cerr := rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = info.State
		}
	}); cerr != nil {
		return false
	}
	return state == tcpCloseWait
}

// tcpCloseWait is TCP_CLOSE_WAIT (include/net/tcp_states.h).
const tcpCloseWait = 8
