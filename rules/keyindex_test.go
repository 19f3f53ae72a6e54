package rules

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kdiag/kdiag/config"
)

// TestEffectiveIndex checks the key index against a map, on files of
// repeated keys at several ranks and sizes (the table wraps around and
// fills to its load), and for keys no entry has.
func TestEffectiveIndex(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100, 5000} {
		r := rand.New(rand.NewPCG(uint64(n), 1))
		f := &config.File{}
		for i := range n {
			key := fmt.Sprintf("k%d", r.IntN(n/2+1))
			if i%11 == 0 {
				key = "" // an entry of no key is never effective
			}
			f.Entries = append(f.Entries, config.Entry{Key: key, Rank: int32(r.IntN(3))})
		}
		want := map[string]int32{}
		wantRepeated := map[string]bool{}
		for i, e := range f.Entries {
			if e.Key == "" {
				continue
			}
			if prev, ok := want[e.Key]; ok {
				wantRepeated[e.Key] = true
				if f.Entries[prev].Rank > e.Rank {
					continue
				}
			}
			want[e.Key] = int32(i)
		}
		eff, repeated := effective(f)
		for k, w := range want {
			if got, ok := eff.get(f.Entries, k); !ok || got != w {
				t.Errorf("n=%d: %q: got %d %v, want %d", n, k, got, ok, w)
			}
		}
		for _, k := range []string{"", "absent", fmt.Sprintf("k%d", n)} {
			if got, ok := eff.get(f.Entries, k); ok {
				t.Errorf("n=%d: %q found at %d, is in no entry", n, k, got)
			}
		}
		if len(repeated) != len(wantRepeated) {
			t.Errorf("n=%d: %d repeated keys, want %d", n, len(repeated), len(wantRepeated))
		}
		for k := range wantRepeated {
			if !repeated[k] {
				t.Errorf("n=%d: %q not among the repeated keys", n, k)
			}
		}
	}
}
