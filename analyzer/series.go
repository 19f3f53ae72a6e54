package analyzer

import (
	"encoding/binary"
	"math/bits"
)

// series is one Counts per sample, stored as the first sample's counts and,
// for each sample after it, what changed since the one before: a bitmask of
// the states whose count moved (a uvarint) and each move (a zigzag
// varint). Samples mostly repeat the one before, so one costs a byte where
// a Counts costs 128: a watch at 1 Hz kept 3,600 Counts an hour for every
// process and every remote it tracks (65 remotes of a server process: 30
// MB an hour).
type series struct {
	first Counts // the first sample's
	last  Counts // the last sample's
	// deltas holds the samples after the first, from off on: the bytes
	// before off are of samples trimmed away (compacted once they are
	// most of the buffer).
	deltas []byte
	off    int
	n      int
	// nonzero counts the samples that are not all zero.
	nonzero int
}

// len returns the number of samples.
func (s *series) len() int { return s.n }

// lastCounts returns the last sample's counts (zero for none).
func (s *series) lastCounts() Counts {
	if s.n == 0 {
		return Counts{}
	}
	return s.last
}

// push appends a sample.
func (s *series) push(c Counts) {
	if c != (Counts{}) {
		s.nonzero++
	}
	if s.n == 0 {
		s.first, s.last, s.n = c, c, 1
		return
	}
	var mask uint64
	for i := range c {
		if c[i] != s.last[i] {
			mask |= 1 << i
		}
	}
	s.deltas = binary.AppendUvarint(s.deltas, mask)
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		s.deltas = binary.AppendVarint(s.deltas, int64(c[i]-s.last[i]))
	}
	s.last = c
	s.n++
}

// apply decodes the delta at b[pos:] onto c and returns the position after it.
func apply(c *Counts, b []byte, pos int) int {
	mask, k := binary.Uvarint(b[pos:])
	pos += k
	for m := mask; m != 0; m &= m - 1 {
		d, k := binary.Varint(b[pos:])
		pos += k
		c[bits.TrailingZeros64(m)] += int(d)
	}
	return pos
}

// each calls fn with each sample's index (from 0) and counts, in order,
// until fn returns false.
func (s *series) each(fn func(i int, c Counts) bool) {
	if s.n == 0 {
		return
	}
	c := s.first
	if !fn(0, c) {
		return
	}
	pos := s.off
	for i := 1; i < s.n; i++ {
		pos = apply(&c, s.deltas, pos)
		if !fn(i, c) {
			return
		}
	}
}

// dropFront removes the first k samples.
func (s *series) dropFront(k int) {
	if k <= 0 {
		return
	}
	if k >= s.n {
		*s = series{}
		return
	}
	for range k {
		if s.first != (Counts{}) {
			s.nonzero--
		}
		s.off = apply(&s.first, s.deltas, s.off)
	}
	s.n -= k
	if s.off > len(s.deltas)/2 && s.off > 4096 {
		s.deltas = append(s.deltas[:0:0], s.deltas[s.off:]...)
		s.off = 0
	}
}

// allZero reports whether every sample is zero.
func (s *series) allZero() bool { return s.nonzero == 0 }
