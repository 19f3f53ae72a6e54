package netstat

import (
	"unsafe"

	"github.com/kdiag/kdiag/netstat/sockfd"
)

// fdTable holds the socket fds of one pass of the iterator that a
// one-shot scan ran while the kernel dumped: 16 bytes a socket fd, in
// chunks mapped outside the Go heap and unmapped by release (as the dump's
// spill chunks are, see socketCollector): grown by appending in the heap,
// the 80,000 fds of 60,000 sockets cost 5 MB of slices and their garbage
// and raised a close-wait scan's peak RSS by 7 MB (20.1 -> 27.1 MB).
type fdTable struct {
	chunks []fdChunk
	n      int
}

// fdRec is one socket fd: its inode, its pid with what it is in the top
// bits (fdTCP4, fdTCP6; 0 for another protocol, or not asked; fdHeld for
// a TCP socket in state CLOSE), its fd.
type fdRec struct {
	ino uint64
	pid uint32
	fd  int32
}

// The kind bits of fdRec.pid: pids are below 2^22 (PID_MAX_LIMIT,
// include/linux/threads.h).
const (
	fdTCP4    = 1 << 30
	fdTCP6    = 2 << 30
	fdHeld    = 1 << 29 // sockfd.FD.HeldClose
	fdPIDMask = 1<<29 - 1
)

// fdChunkLen is the records of one chunk: 1 MiB.
const fdChunkLen = 1 << 16

type fdChunk struct {
	recs []fdRec
	mem  []byte // nil when it fell back to the heap
}

func (t *fdTable) add(f sockfd.FD) {
	if k := len(t.chunks); k == 0 || len(t.chunks[k-1].recs) == fdChunkLen {
		mem := mapAnon(fdChunkLen * int(unsafe.Sizeof(fdRec{})))
		c := fdChunk{mem: mem}
		if mem != nil {
			c.recs = unsafe.Slice((*fdRec)(unsafe.Pointer(&mem[0])), fdChunkLen)[:0]
		} else {
			c.recs = make([]fdRec, 0, fdChunkLen)
		}
		t.chunks = append(t.chunks, c)
	}
	pid := uint32(f.PID) & fdPIDMask
	if f.IsTCP() {
		pid |= fdTCP4
		if f.IPv6() {
			pid = pid&fdPIDMask | fdTCP6
		}
		if f.HeldClose() {
			pid |= fdHeld
		}
	}
	c := &t.chunks[len(t.chunks)-1]
	c.recs = append(c.recs, fdRec{ino: f.Inode, pid: pid, fd: f.FD}) // within capacity
	t.n++
}

// each calls fn for every record, in order, until it returns false.
func (t *fdTable) each(fn func(r fdRec) bool) {
	for _, c := range t.chunks {
		for _, r := range c.recs {
			if !fn(r) {
				return
			}
		}
	}
}

// release unmaps the chunks.
func (t *fdTable) release() {
	for _, c := range t.chunks {
		if c.mem != nil {
			unmapAnon(c.mem)
		}
	}
	*t = fdTable{}
}

// fd returns the record as a sockfd.FD (its family and protocol only when
// it is TCP, its state only when it is held CLOSE).
func (r fdRec) sockFD() sockfd.FD {
	f := sockfd.FD{Inode: r.ino, PID: int32(r.pid & fdPIDMask), FD: r.fd}
	switch r.pid &^ (fdPIDMask | fdHeld) {
	case fdTCP4:
		f.Family, f.Type, f.Protocol = 2, 1, 6
	case fdTCP6:
		f.Family, f.Type, f.Protocol = 10, 1, 6
	}
	if r.pid&fdHeld != 0 {
		f.State = sockfd.TCPClose
	}
	return f
}
