// Package testio holds I/O helpers for tests that several packages share
// (a _test.go file cannot be imported from another package).
package testio

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
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

// Held is a child process started with its stdin held open by the test:
// the children here run until their stdin ends, which the test's cleanup
// (or Release) brings about.
type Held struct {
	Cmd   *exec.Cmd
	Stdin io.WriteCloser
	lines chan string
}

// StartHeld starts cmd with pipes on its stdin and stdout (stderr goes to
// the test's, unless cmd sets it) and, at the test's end, closes its stdin
// and waits for it, killing it after 10 s.
func StartHeld(t testing.TB, cmd *exec.Cmd) *Held {
	t.Helper()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A pipe of its own, not cmd.StdoutPipe: Wait closes that pipe's read
	// end as soon as the child exits, so Release would race the reader for
	// the child's last lines and a Line after it could find the output
	// cut. This read end is the reader's, closed at its EOF.
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		t.Fatal(err)
	}
	h := &Held{Cmd: cmd, Stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer stdout.Close()
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			h.lines <- s.Text()
		}
		close(h.lines)
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(h.Release)
	return h
}

// Line returns the child's next line of output, and fails the test if none
// comes within d or the output ends.
func (h *Held) Line(t testing.TB, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatalf("%s ended its output", h.Cmd.Path)
		}
		return l
	case <-time.After(d):
		t.Fatalf("%s wrote no line within %s", h.Cmd.Path, d)
		return ""
	}
}

// Release closes the child's stdin and waits for it to exit, killing it
// after 10 s. It may be called more than once.
func (h *Held) Release() {
	h.Stdin.Close()
	if h.Cmd.ProcessState != nil {
		return
	}
	done := make(chan struct{})
	go func() { h.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.Cmd.Process.Kill()
		<-done
	}
}
