package netstat

import "iter"

// inodeIndex is attribution's set of wanted inodes, each with its index
// below n (a socket of the scan, or an entry of Attribute's list): an
// open-addressing hash table (linear probing) of 4-byte indexes into
// inodes, at a load of at most 1/2. For the 60,000 sockets of a watch
// it takes 0.7 MB (the inodes and the slots) where a map[uint64]int32 took
// 3.6 MB of the heap (BENCHMARKS.md, watch's memory). Hand-written because
// a Go map stores its keys and values in slots of its own, sized for
// growth, and this one is refilled every scan at a known size.
type inodeIndex struct {
	// inodes holds the inode of each index; 0 for an index with none
	// (a TIME_WAIT socket), which is not in the set.
	inodes []uint64
	// slots hold an index into inodes plus one; 0 is an empty slot. Its
	// length is a power of two.
	slots []int32
	shift uint8
	n     int
}

// reset empties x and readies it for indexes below n, of which about
// keys will be set (a dump's TIME_WAIT and orphaned sockets have no
// inode: sized for every socket, the table of a scan with 20,000 FIN_WAIT2
// orphans beside 60,000 sockets doubled), reusing its memory.
func (x *inodeIndex) reset(n, keys int) {
	if cap(x.inodes) < n {
		x.inodes = make([]uint64, n)
	}
	x.inodes = x.inodes[:n]
	clear(x.inodes)
	x.n = 0
	x.size(keys)
}

// size makes the table empty, with room for keys at a load of at most 1/2.
func (x *inodeIndex) size(keys int) {
	size, shift := 8, uint8(61)
	for size < 2*keys {
		size, shift = size*2, shift-1
	}
	if cap(x.slots) < size {
		x.slots = make([]int32, size)
	}
	x.slots = x.slots[:size]
	clear(x.slots)
	x.shift = shift
}

// hash is Fibonacci hashing: the high bits of the inode times 2^64/phi.
// Socket inodes are the kernel's counter (get_next_ino), close together,
// and the multiplication spreads them over the table.
func (x *inodeIndex) hash(ino uint64) int { return int((ino * 0x9E3779B97F4A7C15) >> x.shift) }

// slot returns the slot holding ino (found) or the empty one where it
// would go.
func (x *inodeIndex) slot(ino uint64) (int, bool) {
	mask := len(x.slots) - 1
	for i := x.hash(ino); ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return i, false
		}
		if x.inodes[v-1] == ino {
			return i, true
		}
	}
}

// set records ino with index i (below reset's n); an inode set again takes
// the later index, as a map assignment would. An inode of 0 is left out.
func (x *inodeIndex) set(ino uint64, i int32) {
	if ino == 0 {
		return
	}
	s, found := x.slot(ino)
	if found {
		x.inodes[x.slots[s]-1] = 0
	} else if 2*(x.n+1) > len(x.slots) {
		// More keys than reset was told: grow rather than fill up (a
		// full table would never find an empty slot).
		x.size(2 * (x.n + 1))
		for j, k := range x.inodes {
			if k != 0 {
				e, _ := x.slot(k)
				x.slots[e] = int32(j) + 1
			}
		}
		s, _ = x.slot(ino)
	}
	if !found {
		x.n++
	}
	x.inodes[i] = ino
	x.slots[s] = i + 1
}

// get returns the index of ino.
func (x *inodeIndex) get(ino uint64) (int32, bool) {
	if ino == 0 || len(x.slots) == 0 {
		return 0, false
	}
	s, ok := x.slot(ino)
	if !ok {
		return 0, false
	}
	return x.slots[s] - 1, true
}

// has reports whether ino is in the set.
func (x *inodeIndex) has(ino uint64) bool {
	_, ok := x.get(ino)
	return ok
}

// len returns the number of inodes in the set.
func (x *inodeIndex) len() int { return x.n }

// all yields every inode of the set with its index, in index order.
func (x *inodeIndex) all() iter.Seq2[uint64, int32] {
	return func(yield func(uint64, int32) bool) {
		for i, ino := range x.inodes {
			if ino != 0 && !yield(ino, int32(i)) {
				return
			}
		}
	}
}
