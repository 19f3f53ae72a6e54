// Package testio holds I/O helpers for tests that several packages share
// (a _test.go file cannot be imported from another package).
package testio

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that goroutines may write into (a logger, a
// command's output streams) while the test reads what they wrote so far.
// The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor polls cond every 100 ms until it holds, and fails the test with
// what it waited for once d has passed: the bound keeps a broken test from
// hanging, it is not what the test checks.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for: %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
