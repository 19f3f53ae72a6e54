package testio

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestSyncBufferConcurrent writes from several goroutines while reading; run
// with -race it fails if the buffer is not guarded, and it checks that no
// write is lost or torn.
func TestSyncBufferConcurrent(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "g%d-%d\n", g, i)
			}
		}()
	}
	for range 10 {
		_ = b.String()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	for g := range 4 {
		for i := range 100 {
			if l := fmt.Sprintf("g%d-%d", g, i); !seen[l] {
				t.Errorf("line %q lost", l)
			}
		}
	}
}
