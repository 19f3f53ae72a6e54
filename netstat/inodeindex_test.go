package netstat

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInodeIndex checks the index against the map it replaced: the same
// answers for consecutive inodes (as the kernel hands them out), random
// ones, repeats (the later index wins) and zeros (left out), at sizes
// around the table's growth, refilled in the same memory.
func TestInodeIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x inodeIndex
	for _, n := range []int{0, 1, 7, 8, 9, 100, 4096, 60000, 60001, 3} {
		inodes := make([]uint64, n)
		base := uint64(rng.Uint32())
		for i := range inodes {
			switch rng.IntN(10) {
			case 0:
				inodes[i] = 0 // a TIME_WAIT socket
			case 1:
				if i > 0 {
					inodes[i] = inodes[rng.IntN(i)] // a repeat
					break
				}
				fallthrough
			case 2:
				inodes[i] = rng.Uint64()
			default:
				inodes[i] = base + uint64(i)
			}
		}
		want := map[uint64]int32{}
		// Told too few keys now and then: the table grows.
		keys := n
		if n%2 == 1 {
			keys = n / 4
		}
		x.reset(n, keys)
		for i, ino := range inodes {
			x.set(ino, int32(i))
			if ino != 0 {
				want[ino] = int32(i)
			}
		}
		if x.len() != len(want) {
			t.Errorf("n=%d: len %d, want %d", n, x.len(), len(want))
		}
		got := map[uint64]int32{}
		for ino, i := range x.all() {
			if _, dup := got[ino]; dup {
				t.Errorf("n=%d: all yields inode %d twice", n, ino)
			}
			got[ino] = i
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("n=%d: all (-want +got):\n%s", n, d)
		}
		for ino, wi := range want {
			if i, ok := x.get(ino); !ok || i != wi {
				t.Errorf("n=%d: get(%d) = %d, %v; want %d", n, ino, i, ok, wi)
			}
		}
		for range 1000 {
			ino := rng.Uint64()
			if _, in := want[ino]; !in && x.has(ino) {
				t.Errorf("n=%d: has(%d) for an inode never set", n, ino)
			}
		}
		if x.has(0) {
			t.Errorf("n=%d: has(0)", n)
		}
	}
	var empty inodeIndex
	if empty.has(5) || empty.len() != 0 {
		t.Error("a zero inodeIndex is not empty")
	}
}

// BenchmarkInodeIndex is attribution's lookups for a watch of 60,000
// sockets: the index filled from the sockets' inodes, then looked up once
// per socket fd of a pass (80,000, a quarter not wanted).
func BenchmarkInodeIndex(b *testing.B) {
	const n = 60000
	inodes := make([]uint64, n)
	for i := range inodes {
		inodes[i] = 1_000_000 + uint64(i)*3
	}
	var x inodeIndex
	b.ReportAllocs()
	for b.Loop() {
		// Told too few keys now and then: the table grows.
		keys := n
		if n%2 == 1 {
			keys = n / 4
		}
		x.reset(n, keys)
		for i, ino := range inodes {
			x.set(ino, int32(i))
		}
		found := 0
		for i := range 80000 {
			if x.has(1_000_000 + uint64(i)*3) {
				found++
			}
		}
		if found != n {
			b.Fatalf("found %d of %d", found, n)
		}
	}
}
