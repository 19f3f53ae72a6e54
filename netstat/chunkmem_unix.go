//go:build unix

package netstat

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// chunkMem is the memory of one spill chunk: an anonymous mapping outside
// the Go heap, so that release gives it back to the kernel at once instead
// of at some later collection (see socketCollector.collect). A chunk holds
// packedSockets, which have no pointers, so the garbage collector need not
// see it.
type chunkMem struct {
	recs []packedSocket
	mem  []byte // the mapping; nil when it fell back to the heap
}

func newChunkMem(n int) chunkMem {
	size := n * int(unsafe.Sizeof(packedSocket{}))
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return chunkMem{recs: make([]packedSocket, 0, n)}
	}
	return chunkMem{recs: unsafe.Slice((*packedSocket)(unsafe.Pointer(&mem[0])), n)[:0], mem: mem}
}

func (c *chunkMem) release() {
	if c.mem != nil {
		_ = unix.Munmap(c.mem) // fails only for a bad range, which this is not
	}
	*c = chunkMem{}
}

// mapAnon maps size bytes of anonymous memory outside the Go heap (pages
// are given memory as they are written), nil when it cannot.
func mapAnon(size int) []byte {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	return mem
}

// unmapAnon gives back a mapping of mapAnon.
func unmapAnon(mem []byte) { _ = unix.Munmap(mem) }
