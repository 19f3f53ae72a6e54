package analyzer

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSeries: a series gives back the counts pushed, in order, through
// pushes and trims at random, with negative and large moves.
func TestSeries(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s series
	var want []Counts
	var c Counts
	for step := 0; step < 20000; step++ {
		switch r.IntN(10) {
		case 0:
			k := r.IntN(len(want) + 1)
			s.dropFront(k)
			want = want[k:]
		default:
			if r.IntN(200) == 0 {
				c = Counts{} // back to nothing
			} else if r.IntN(3) == 0 { // a sample that moves
				i := r.IntN(len(c))
				c[i] += r.IntN(2000) - 1000
				if r.IntN(50) == 0 {
					c[i] = 1 << 40
				}
			}
			s.push(c)
			want = append(want, c)
		}
		if s.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, s.len(), len(want))
		}
		zero := true
		for _, w := range want {
			zero = zero && w == (Counts{})
		}
		if s.allZero() != zero {
			t.Fatalf("step %d: allZero %v, want %v", step, s.allZero(), zero)
		}
	}
	var got []Counts
	s.each(func(i int, x Counts) bool {
		if i != len(got) {
			t.Fatalf("index %d, want %d", i, len(got))
		}
		got = append(got, x)
		return true
	})
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	if len(want) > 0 && s.lastCounts() != want[len(want)-1] {
		t.Errorf("lastCounts %v, want %v", s.lastCounts(), want[len(want)-1])
	}
	if s.allZero() {
		t.Error("allZero on moved counts")
	}
	var z series
	z.push(Counts{})
	z.push(Counts{})
	if !z.allZero() {
		t.Error("allZero false on zeros")
	}
}

// TestSeriesSize: a series that repeats costs a byte a sample.
func TestSeriesSize(t *testing.T) {
	var s series
	c := Counts{7: 20000, 1: 3}
	for i := 0; i < 3600; i++ {
		if i%600 == 0 {
			c[7]++
		}
		s.push(c)
	}
	if n := len(s.deltas); n > 3700 {
		t.Errorf("3,600 mostly equal samples take %d bytes, want about one each", n)
	}
}
