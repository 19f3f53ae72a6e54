//go:build !unix

package netstat

// chunkMem is the memory of one spill chunk; without mmap, a heap slice.
type chunkMem struct {
	recs []packedSocket
}

func newChunkMem(n int) chunkMem { return chunkMem{recs: make([]packedSocket, 0, n)} }

func (c *chunkMem) release() { *c = chunkMem{} }

// mapAnon has no mapping to give without mmap: the caller uses the heap.
func mapAnon(size int) []byte { return nil }

// unmapAnon does nothing.
func unmapAnon(mem []byte) {}
