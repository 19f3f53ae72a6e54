package netstat

import (
	"slices"
	"testing"
)

func TestSocketCollector(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		n        int
	}{
		{"empty", 0, 0},
		{"fits the buffer", 10, 10},
		{"no buffer, one partial chunk", 0, 7},
		{"no buffer, several chunks", 0, 3*collectorChunk + 5},
		{"spills past the buffer", 100, 2*collectorChunk + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &socketCollector{s: make([]Socket, 0, tc.capacity)}
			var want []Socket
			for i := range tc.n {
				s := Socket{Inode: uint64(i + 1), PID: i}
				c.add(s)
				want = append(want, s)
			}
			got := c.collect()
			if !slices.Equal(got, want) {
				t.Fatalf("collected %d sockets, want %d in order", len(got), len(want))
			}
			if tc.n > tc.capacity && cap(got) > tc.n+tc.n/8+8 {
				t.Errorf("cap %d for %d sockets: want about one exact allocation", cap(got), tc.n)
			}
			// A collector reused with the result as its buffer does not spill.
			c2 := &socketCollector{s: got[:0]}
			for _, s := range want {
				c2.add(s)
			}
			if c2.n != 0 || !slices.Equal(c2.collect(), want) {
				t.Errorf("reused buffer spilled %d sockets", c2.n)
			}
		})
	}
}
