//go:build !linux

package broker

import "net"

// unreadBytes cannot see the socket's receive queue here (x/sys/unix has
// SIOCINQ for Linux only): a request the broker has not begun to read
// counts as none.
func unreadBytes(net.Conn) int { return 0 }
