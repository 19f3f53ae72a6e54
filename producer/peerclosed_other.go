//go:build !linux

package producer

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed says whether the broker has closed its end of nc: a
// non-blocking peek reads 0 bytes (end of stream) once the FIN has come,
// whether or not a reader saw the EOF before. Linux asks the kernel for the
// TCP state instead (peerclosed_linux.go).
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	eof := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		eof = n == 0 && err == nil
	})
	return eof
}
