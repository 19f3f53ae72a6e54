package netstat

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInodeTable checks the table against the map it replaced, through
// what a repeated scan does to it: puts of consecutive inodes (as the
// kernel hands them out), random ones and repeats, from a table reset for
// the right number of keys or for far too few (it grows), then sweeps that
// keep some, then more puts, at sizes around the table's growth.
func TestInodeTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x inodeTable[int32]
	want := map[uint64]int32{}
	var order []uint64 // want's keys in the order first put
	check := func(step string) {
		t.Helper()
		if x.len() != len(want) {
			t.Fatalf("%s: len %d, want %d", step, x.len(), len(want))
		}
		var got []uint64
		for ino, e := range x.all() {
			got = append(got, ino)
			if *e != want[ino] {
				t.Errorf("%s: all gives inode %d entry %d, want %d", step, ino, *e, want[ino])
			}
		}
		if d := cmp.Diff(order, got); d != "" {
			t.Errorf("%s: all's order (-put +got):\n%s", step, d)
		}
		for ino, w := range want {
			if e, ok := x.get(ino); !ok || *e != w {
				t.Errorf("%s: get(%d) = %v, %v; want %d", step, ino, e, ok, w)
			}
		}
		for range 1000 {
			ino := rng.Uint64()
			if _, in := want[ino]; !in && x.has(ino) {
				t.Errorf("%s: has(%d), an inode never put", step, ino)
			}
		}
	}
	put := func(ino uint64, v int32) {
		e, added := x.put(ino)
		if _, had := want[ino]; added == had {
			t.Fatalf("put(%d): added %v, but it was there before: %v", ino, added, had)
		}
		if added {
			order = append(order, ino)
		}
		*e = v
		want[ino] = v
	}
	for _, n := range []int{0, 1, 7, 8, 9, 100, 4096, 60000, 60001, 3} {
		keys := n
		if n%2 == 1 {
			keys = n / 4 // told too few: the table must grow
		}
		x.reset(keys)
		clear(want)
		order = nil
		base := uint64(rng.Uint32())
		for i := range n {
			switch rng.IntN(10) {
			case 0:
				if len(order) > 0 {
					put(order[rng.IntN(len(order))], int32(i)) // a repeat
					continue
				}
				fallthrough
			case 1:
				put(rng.Uint64(), int32(i))
			default:
				put(base+uint64(i), int32(i))
			}
		}
		check("filled")
		// A sweep keeps the entries with even values, in order.
		x.sweep(func(ino uint64, e *int32) bool { return *e%2 == 0 })
		kept := order[:0]
		for _, ino := range order {
			if want[ino]%2 == 0 {
				kept = append(kept, ino)
			} else {
				delete(want, ino)
			}
		}
		order = kept
		check("swept")
		for i := range n / 2 {
			put(base+uint64(n+i), int32(i))
		}
		check("refilled")
	}
	var empty inodeTable[int32]
	if empty.has(5) || empty.len() != 0 {
		t.Error("a zero inodeTable is not empty")
	}
	empty.sweep(func(uint64, *int32) bool { return true })
}

// TestInodeTableShrinks: a sweep that leaves a small part of a large table
// gives the memory back.
func TestInodeTableShrinks(t *testing.T) {
	var x inodeTable[cwEntry]
	for i := range 50000 {
		x.put(uint64(i + 1))
	}
	x.sweep(func(ino uint64, _ *cwEntry) bool { return ino <= 10 })
	if x.len() != 10 || cap(x.entries) > 1024+40 || len(x.slots) > 64 {
		t.Errorf("after a sweep to 10 entries: %d entries, capacity %d, %d slots", x.len(), cap(x.entries), len(x.slots))
	}
	for i := range 10 {
		if !x.has(uint64(i + 1)) {
			t.Errorf("inode %d lost", i+1)
		}
	}
}

// BenchmarkInodeTable is attribution's lookups for a watch of 60,000
// sockets: the table filled from the sockets' inodes, then looked up once
// per socket fd of a pass (80,000, a quarter not wanted).
func BenchmarkInodeTable(b *testing.B) {
	const n = 60000
	inodes := make([]uint64, n)
	for i := range inodes {
		inodes[i] = 1_000_000 + uint64(i)*3
	}
	var x inodeTable[int32]
	b.ReportAllocs()
	for b.Loop() {
		x.reset(n)
		for i, ino := range inodes {
			e, _ := x.put(ino)
			*e = int32(i)
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

// TestInodeTableReserve: after reserve(n), filling the table to n entries
// neither grows the entries nor rehashes the table, and the memory is that
// of n entries, not append's quarter more; reserving what it holds again
// (a table refilled every scan) takes no more.
func TestInodeTableReserve(t *testing.T) {
	var x inodeTable[ageRecord]
	x.put(1)
	x.reserve(20001)
	entries, slots := cap(x.entries), len(x.slots)
	if entries > 20001+20001/8 || slots > 2*32768 {
		t.Errorf("reserve(20001) after 1: capacity %d, %d slots", entries, slots)
	}
	for i := range 20000 {
		x.put(uint64(i + 2))
	}
	x.reserve(20001)
	if cap(x.entries) != entries || len(x.slots) != slots {
		t.Errorf("filled to its reserve: capacity %d -> %d, slots %d -> %d", entries, cap(x.entries), slots, len(x.slots))
	}
}
