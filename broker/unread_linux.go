package broker

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unreadBytes returns how many bytes wait in conn's socket receive queue,
// read by nobody yet (SIOCINQ, ioctl_tcp(7)): a request the client sent
// that the broker has not begun to read. 0 when it cannot tell.
func unreadBytes(conn net.Conn) int {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n
}
