package netstat

import "iter"

// inodeTable maps socket inodes to entries of type E, held densely: the
// inodes and the entries in two slices, in the order they were put, and an
// open-addressing hash table (linear probing, at a load of at most 1/2) of
// 4-byte indexes into them. Entries leave only by sweep, which compacts
// the slices and rebuilds the table: the tables a repeated scan keeps are
// swept once a scan, not deleted from one by one.
//
// Hand-written because a Go map stores its keys and values in slots of its
// own, sized for growth and about half full on average: at 20,000
// CLOSE_WAIT sockets a map[uint64]cwEntry took 118 bytes an entry for 56
// bytes of entry, a map[ageKey]ageRecord 79 for 24, and attribution's
// map[uint64]int32 of 60,000 sockets 3.6 MB (BENCHMARKS.md, watch's memory).
//
// A pointer get or put returns is valid until the next put, sweep or
// reset.
type inodeTable[E any] struct {
	inodes  []uint64
	entries []E
	// slots hold an index into inodes and entries plus one; 0 is an empty
	// slot. Its length is a power of two, 1<<(64-shift).
	slots []int32
	shift uint8
}

// hash is Fibonacci hashing: the high bits of the inode times 2^64/phi.
// Socket inodes are the kernel's counter (get_next_ino), close together,
// and the multiplication spreads them over the table.
func (t *inodeTable[E]) hash(ino uint64) int { return int((ino * 0x9E3779B97F4A7C15) >> t.shift) }

// find returns the slot holding ino (found) or the empty one where it
// would go. The table must have slots.
func (t *inodeTable[E]) find(ino uint64) (int, bool) {
	mask := len(t.slots) - 1
	for i := t.hash(ino); ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return i, false
		}
		if t.inodes[v-1] == ino {
			return i, true
		}
	}
}

// rehash sizes the table for keys (at least the entries held) and fills
// it with the entries' indexes. Its memory is reused unless too small, or
// with shrink more than four times too large.
func (t *inodeTable[E]) rehash(keys int, shrink bool) {
	size, shift := 8, uint8(61)
	for size < 2*max(keys, len(t.inodes)) {
		size, shift = size*2, shift-1
	}
	if cap(t.slots) < size || shrink && cap(t.slots) > 4*size {
		t.slots = make([]int32, size)
	}
	t.slots, t.shift = t.slots[:size], shift
	clear(t.slots)
	for i, ino := range t.inodes {
		s, _ := t.find(ino)
		t.slots[s] = int32(i) + 1
	}
}

// reset empties t, readied for keys entries without growing. Its memory
// is kept for the next (attribution resets one table for each namespace
// of a scan, of very different sizes).
func (t *inodeTable[E]) reset(keys int) {
	if cap(t.inodes) < keys {
		t.inodes, t.entries = make([]uint64, 0, keys), make([]E, 0, keys)
	}
	clear(t.entries) // an E with pointers must not keep what they point to
	t.inodes, t.entries = t.inodes[:0], t.entries[:0]
	t.rehash(keys, false)
}

// reserve makes room for size entries in all without growing by append's
// quarter: a table filled from empty by puts holds up to a quarter more
// than its entries for as long as it lives. A table refilled scan after
// scan is given the number the scan may hold (its sockets of the table's
// state), most of them there already.
func (t *inodeTable[E]) reserve(size int) {
	if 2*size > len(t.slots) {
		t.rehash(size, false)
	}
	if cap(t.inodes) >= size {
		return
	}
	t.inodes = append(make([]uint64, 0, size), t.inodes...)
	t.entries = append(make([]E, 0, size), t.entries...)
}

// get returns ino's entry.
func (t *inodeTable[E]) get(ino uint64) (*E, bool) {
	if len(t.slots) == 0 {
		return nil, false
	}
	s, ok := t.find(ino)
	if !ok {
		return nil, false
	}
	return &t.entries[t.slots[s]-1], true
}

// has reports whether ino has an entry.
func (t *inodeTable[E]) has(ino uint64) bool {
	_, ok := t.get(ino)
	return ok
}

// put returns ino's entry, added (its zero value) if it had none.
func (t *inodeTable[E]) put(ino uint64) (e *E, added bool) {
	if 2*(len(t.inodes)+1) > len(t.slots) {
		t.rehash(len(t.inodes)+1, false) // doubles it
	}
	s, found := t.find(ino)
	if found {
		return &t.entries[t.slots[s]-1], false
	}
	t.inodes = append(t.inodes, ino)
	var zero E
	t.entries = append(t.entries, zero)
	t.slots[s] = int32(len(t.inodes))
	return &t.entries[len(t.entries)-1], true
}

// len returns the number of entries.
func (t *inodeTable[E]) len() int { return len(t.inodes) }

// all yields every inode and its entry, in the order they were put.
func (t *inodeTable[E]) all() iter.Seq2[uint64, *E] {
	return func(yield func(uint64, *E) bool) {
		for i, ino := range t.inodes {
			if !yield(ino, &t.entries[i]) {
				return
			}
		}
	}
}

// sweep keeps the entries keep returns true for, in their order, and
// drops the rest.
func (t *inodeTable[E]) sweep(keep func(ino uint64, e *E) bool) {
	j := 0
	for i, ino := range t.inodes {
		if keep(ino, &t.entries[i]) {
			t.inodes[j], t.entries[j] = ino, t.entries[i]
			j++
		}
	}
	if j == len(t.inodes) {
		return
	}
	clear(t.entries[j:])
	t.inodes, t.entries = t.inodes[:j], t.entries[:j]
	if cap(t.inodes) > 4*j+1024 { // the sockets went away: so can the memory
		t.inodes, t.entries = append([]uint64(nil), t.inodes...), append([]E(nil), t.entries...)
	}
	t.rehash(j, true)
}
