// Package testio holds I/O helpers for tests that several packages share
// (a _test.go file cannot be imported from another package).
package testio

import (
	"bytes"
	"sync"
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
