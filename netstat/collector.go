package netstat

import (
	"net/netip"
	"time"
)

// socketCollector gathers a dump's sockets into s while it has room, then
// into fixed-size chunks of packed records, and collect joins them with one
// allocation of the exact size. Appending to one slice instead regrows it
// by about a quarter each time past 256 elements, which allocates some five
// times the final size: 40 MB of garbage for the 60,000 sockets of a
// watch's first scan, most of that scan's memory peak. A repeated scan's s
// has the last scan's capacity, so it usually never spills.
//
// A one-shot scan always spills (its s is empty), and joining is its memory
// peak: the chunks and the result at once. So a chunk holds packedSockets,
// 96 bytes against a Socket's 128, in memory mapped outside the Go heap
// (chunkMem), and collect unmaps each chunk as soon as it is copied: the
// peak is the result and one chunk, not the result and every chunk, since
// the heap would keep the chunks' pages until a collection and then for
// reuse (20,000 CLOSE_WAIT of 60,000 sockets: peak RSS 20.2 -> 18.9 MB).
type socketCollector struct {
	s      []Socket
	chunks []chunkMem
	n      int // sockets in chunks
}

// collectorChunk is the size of a spill chunk: 1,024 sockets, 96 KiB.
const collectorChunk = 1024

func (c *socketCollector) add(s Socket) {
	if len(c.s) < cap(c.s) {
		c.s = append(c.s, s)
		return
	}
	if k := len(c.chunks); k == 0 || len(c.chunks[k-1].recs) == collectorChunk {
		c.chunks = append(c.chunks, newChunkMem(collectorChunk))
	}
	ch := &c.chunks[len(c.chunks)-1]
	ch.recs = append(ch.recs, pack(&s)) // within its capacity: never reallocates
	c.n++
}

// collect returns every socket added, in order, and releases the chunks:
// call it (or release) once, also when the dump failed.
func (c *socketCollector) collect() []Socket {
	if c.n == 0 {
		return c.s
	}
	out := c.appendTo(growExact(c.s, c.n))
	c.s = out
	return out
}

// collectRoom is collect with room for extra more sockets after them.
func (c *socketCollector) collectRoom(extra int) []Socket {
	if c.n == 0 && cap(c.s)-len(c.s) >= extra {
		return c.s
	}
	out := c.appendTo(growExact(c.s, c.n+extra))
	c.s = out
	return out
}

// growExact returns s with room for n more sockets: s itself when it has
// it, else a copy in a new array of that size and a sixty-fourth more.
// slices.Grow grows by a quarter at least, as append does, and a repeated
// scan's sockets decode into the last snapshot's memory: a dump that
// outgrew it by one socket, as a host's do from scan to scan, left 25%
// more than the sockets in the heap for the rest of the watch (7.7 MB of
// 60,000 sockets held in 10 MB). The sixty-fourth (940 sockets, 120 KB)
// lets small growth decode in place.
func growExact(s []Socket, n int) []Socket {
	if cap(s)-len(s) >= n {
		return s
	}
	need := len(s) + n
	out := make([]Socket, len(s), need+need/64)
	copy(out, s)
	return out
}

// len returns the number of sockets added; 0 for a nil collector.
func (c *socketCollector) len() int {
	if c == nil {
		return 0
	}
	return len(c.s) + c.n
}

// appendTo appends the sockets in the chunks to dst, releasing each chunk
// once copied, and returns dst. The sockets in s are not appended (a
// collector made with an empty s, as a deferred join's is, has none).
func (c *socketCollector) appendTo(dst []Socket) []Socket {
	for i := range c.chunks {
		ch := &c.chunks[i]
		for j := range ch.recs {
			dst = append(dst, ch.recs[j].unpack())
		}
		ch.release()
	}
	c.chunks, c.n = nil, 0
	return dst
}

// release drops what was added without returning it.
func (c *socketCollector) release() {
	for i := range c.chunks {
		c.chunks[i].release()
	}
	c.s, c.chunks, c.n = c.s[:0], nil, 0
}

// packedSocket is a Socket without pointers or padding: addresses as 16
// bytes, pid and fd as int32. Zones are dropped (the kernel's dumps have
// none); pids and fds fit in 32 bits on Linux (pid_max is at most 2^22).
type packedSocket struct {
	local, remote      [16]byte
	inode, netns       uint64
	age                time.Duration
	recvQ, sendQ, uid  uint32
	ageSpan, idle      uint32
	pid, fd            int32
	localPort, remPort uint16
	family, state      uint8
	flags              uint8
}

const (
	packedHasAge uint8 = 1 << iota
	packedLocal4
	packedLocal6
	packedRemote4
	packedRemote6
)

func pack(s *Socket) packedSocket {
	p := packedSocket{
		inode: s.Inode, netns: s.NetNS, age: s.Age,
		recvQ: s.RecvQ, sendQ: s.SendQ, uid: s.UID, ageSpan: s.AgeSpan, idle: s.IdleMS,
		pid: int32(s.PID), fd: int32(s.FD),
		localPort: s.Local.Port(), remPort: s.Remote.Port(),
		family: uint8(s.Family), state: uint8(s.State),
	}
	if s.HasAge {
		p.flags |= packedHasAge
	}
	p.flags |= packAddr(&p.local, s.Local.Addr(), packedLocal4, packedLocal6)
	p.flags |= packAddr(&p.remote, s.Remote.Addr(), packedRemote4, packedRemote6)
	return p
}

// packAddr writes a into b (an IPv4 address in its first 4 bytes) and
// returns the flag saying which kind it was, 0 for the zero Addr.
func packAddr(b *[16]byte, a netip.Addr, is4, is6 uint8) uint8 {
	var kind uint8
	*b, kind = addrBytes(a)
	switch kind {
	case 4:
		return is4
	case 6:
		return is6
	}
	return 0
}

func unpackAddr(b *[16]byte, flags, is4, is6 uint8) netip.Addr {
	switch {
	case flags&is4 != 0:
		return addrFromBytes(b, 4)
	case flags&is6 != 0:
		return addrFromBytes(b, 6)
	}
	return netip.Addr{}
}

func (p *packedSocket) unpack() Socket {
	s := Socket{
		Family: Family(p.family), State: State(p.state),
		RecvQ: p.recvQ, SendQ: p.sendQ, Inode: p.inode, UID: p.uid,
		Age: p.age, HasAge: p.flags&packedHasAge != 0, AgeSpan: p.ageSpan, IdleMS: p.idle,
		NetNS: p.netns, PID: int(p.pid), FD: int(p.fd),
	}
	s.Local = netip.AddrPortFrom(unpackAddr(&p.local, p.flags, packedLocal4, packedLocal6), p.localPort)
	s.Remote = netip.AddrPortFrom(unpackAddr(&p.remote, p.flags, packedRemote4, packedRemote6), p.remPort)
	return s
}
