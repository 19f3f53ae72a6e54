package netstat

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"unsafe"
)

// TestCollectUnmapsChunks checks that the spill chunks live in mappings
// outside the Go heap and that /proc/self/maps no longer has them once
// collect has copied them out.
func TestCollectUnmapsChunks(t *testing.T) {
	c := &socketCollector{}
	for i := range 3 * collectorChunk {
		c.add(Socket{Inode: uint64(i + 1)})
	}
	var chunks []uintptr
	for _, ch := range c.chunks {
		if ch.mem == nil {
			t.Fatal("a chunk fell back to the heap: mmap failed")
		}
		chunks = append(chunks, uintptr(unsafe.Pointer(&ch.mem[0])))
	}
	if !mapped(t, chunks[0]) {
		t.Fatalf("chunk at %#x is in no mapping of /proc/self/maps", chunks[0])
	}
	if got := c.collect(); len(got) != 3*collectorChunk || got[len(got)-1].Inode != 3*collectorChunk {
		t.Fatalf("collected %d sockets", len(got))
	}
	for _, a := range chunks {
		if mapped(t, a) {
			t.Errorf("chunk at %#x still mapped after collect", a)
		}
	}
}

// mapped reports whether address a lies in a mapping of this process.
func mapped(t *testing.T, a uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && lo <= a && a < hi {
			return true
		}
	}
	return false
}
