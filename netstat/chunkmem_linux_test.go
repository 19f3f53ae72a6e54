package netstat

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"
)

// TestCollectUnmapsChunks checks that the spill chunks live in mappings
// outside the Go heap and that /proc/self/maps no longer has them once
// collect has copied them out.
//
// An address given back may be mapped again by anything that maps memory
// before the check reads the maps: the Go runtime maps its own metadata
// outside the heap arena when a collection or a new stack needs it (seen
// once in CI: two freed chunks inside a new mapping). So the collector is
// off, and the maps are read once, right after collect, with nothing
// allocated in between.
func TestCollectUnmapsChunks(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
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
	if !mapped(t, readMaps(t), chunks[0]) {
		t.Fatalf("chunk at %#x is in no mapping of /proc/self/maps", chunks[0])
	}
	got := c.collect()
	maps := readMaps(t)
	if len(got) != 3*collectorChunk || got[len(got)-1].Inode != 3*collectorChunk {
		t.Fatalf("collected %d sockets", len(got))
	}
	for _, a := range chunks {
		if mapped(t, maps, a) {
			t.Errorf("chunk at %#x still mapped after collect", a)
		}
	}
}

// readMaps returns /proc/self/maps.
func readMaps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mapped reports whether address a lies in a mapping of maps.
func mapped(t *testing.T, maps string, a uintptr) bool {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(maps))
	for sc.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && lo <= a && a < hi {
			return true
		}
	}
	return false
}
