package rules

import (
	"hash/maphash"
	"math/bits"

	"github.com/kdiag/kdiag/config"
)

// keyIndex finds a file's effective entry by key: an open-addressing hash
// table (linear probing) of indexes into the file's entries, 4 bytes a
// slot at a load of at most 3/4, holding no key of its own (the entries
// hold them). A map[string]int32 keeps a copy of each string header and
// takes about 32 bytes a key: 27 MB of a 50 MB file's 812,811 keys, live
// until its last finding is written (BENCHMARKS.md, kdiag lint).
// Hand-written because a Go map cannot be keyed by a field of a slice
// element without storing it.
type keyIndex struct {
	seed  maphash.Seed
	slots []int32 // an index into entries, plus one; 0 is an empty slot
}

// newKeyIndex sizes an index for n keys.
func newKeyIndex(n int) keyIndex {
	return keyIndex{seed: maphash.MakeSeed(), slots: make([]int32, max(8, n+n/3+1))}
}

// find returns the slot of key: the one holding its entry (found), or the
// empty one where it would go.
func (x *keyIndex) find(entries []config.Entry, key string) (slot int, found bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	// The hash's high bits scaled to the table (Lemire's fast range), so
	// that any size works, not only a power of two.
	hi, _ := bits.Mul64(maphash.String(x.seed, key), uint64(len(x.slots)))
	for i := int(hi); ; i++ {
		if i == len(x.slots) {
			i = 0
		}
		v := x.slots[i]
		if v == 0 {
			return i, false
		}
		if entries[v-1].Key == key {
			return i, true
		}
	}
}

// get returns the index of key's entry.
func (x *keyIndex) get(entries []config.Entry, key string) (int32, bool) {
	s, ok := x.find(entries, key)
	if !ok {
		return 0, false
	}
	return x.slots[s] - 1, true
}
