// Package sockfd lists the socket file descriptors of every process, with
// each socket's inode, family, type and protocol, in one pass of the
// kernel's task_file BPF iterator (Linux 5.8; bpf_sock_from_file, which
// the program uses, 5.11). It is what netstat's attribution reads instead
// of /proc/<pid>/fd where it can: a readlinkat of an fd link costs a path
// walk, a dentry and the formatting of "socket:[<inode>]" (about 4 µs a
// socket fd here), the iterator's program a few loads (about 0.7 µs, most
// of it the cache misses of reaching each file and socket), with no
// getxattr to tell a TCP socket from another.
//
// The iterator walks the tasks of the reader's PID namespace (and, of each
// process, the thread group leader and the threads that do not share its
// file table), so a kdiag in a container with its own PID namespace sees
// the processes it can see in /proc, with their pids as /proc numbers them.
//
// The program is built with cilium/ebpf's assembler and loaded with the
// offsets of the kernel's structures read from its BTF
// (/sys/kernel/btf/vmlinux) by a small parser of its own (see parseBTF):
// it needs root (CAP_BPF and CAP_PERFMON) and a kernel built with BTF.
// Where it cannot be had, Open's error wraps ErrUnavailable and the caller
// reads /proc.
package sockfd

import (
	"encoding/binary"
	"errors"
)

// ErrUnavailable is wrapped by Open's error when this system cannot run
// the iterator: not Linux, no permission, no kernel BTF, or a kernel older
// than 5.11.
var ErrUnavailable = errors.New("socket fd iterator unavailable")

// FD is one socket file descriptor of one process.
type FD struct {
	// Inode is the socket's inode (the number in "socket:[<inode>]").
	Inode uint64
	// PID is the process (thread group) holding FD, as the reader's PID
	// namespace numbers it.
	PID int32
	// FD is the descriptor.
	FD int32
	// Family is the socket's address family (AF_INET 2, AF_INET6 10,
	// AF_UNIX 1, ...), 0 for a socket without a struct sock.
	Family uint16
	// Type is the socket's type (SOCK_STREAM 1, SOCK_DGRAM 2, ...).
	Type uint16
	// Protocol is the socket's protocol (IPPROTO_TCP 6, IPPROTO_UDP 17,
	// IPPROTO_MPTCP 262, ...) for inet sockets.
	Protocol uint16
	// State is the sock's state (sock_common.skc_state: for TCP the
	// kernel's TCP states, include/net/tcp_states.h, TCP_CLOSE 7 for a
	// socket reset out of every table or never connected), 0 for a
	// socket without a struct sock. Read with Family, Type and Protocol.
	State uint8
}

// TCPClose is TCP_CLOSE (include/net/tcp_states.h): the state of a TCP
// socket in no kernel table, reset (a keepalive probe's RST after the
// peer's FIN_WAIT_2 expired) or never connected.
const TCPClose = 7

// HeldClose reports whether the socket is a TCP socket in state TCP_CLOSE,
// what netstat calls held CLOSE: its fd held, its socket in no table.
func (f FD) HeldClose() bool { return f.IsTCP() && f.State == TCPClose }

// Address families, types and protocols FD.IsTCP compares with
// (include/linux/socket.h, include/linux/net.h, include/uapi/linux/in.h).
const (
	afInet      = 2
	afInet6     = 10
	sockStream  = 1
	ipprotoTCP  = 6
	recordSize  = 24
	recordInode = 0
	recordPID   = 8
	recordFD    = 12
	recordFam   = 16
	recordType  = 18
	recordProto = 20
	recordState = 22 // then one byte of padding
)

// IsTCP reports whether the socket is a TCP socket (IPv4 or IPv6), what
// sockfs's system.sockprotoname calls "TCP" or "TCPv6".
func (f FD) IsTCP() bool {
	return (f.Family == afInet || f.Family == afInet6) && f.Type == sockStream && f.Protocol == ipprotoTCP
}

// IPv6 reports whether the socket is of family AF_INET6.
func (f FD) IPv6() bool { return f.Family == afInet6 }

// parseRecords calls fn for each complete record in b (the program's
// output: records of recordSize bytes in the host's byte order) and
// returns the bytes of an incomplete last record, which the next read
// completes.
func parseRecords(b []byte, fn func(FD)) []byte {
	le := binary.NativeEndian
	for len(b) >= recordSize {
		fn(FD{
			Inode:    le.Uint64(b[recordInode:]),
			PID:      int32(le.Uint32(b[recordPID:])),
			FD:       int32(le.Uint32(b[recordFD:])),
			Family:   le.Uint16(b[recordFam:]),
			Type:     le.Uint16(b[recordType:]),
			Protocol: le.Uint16(b[recordProto:]),
			State:    b[recordState],
		})
		b = b[recordSize:]
	}
	return b
}
