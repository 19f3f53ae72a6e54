package testio

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestHeld: a held child's lines come in order, and Release ends it by
// closing its stdin (the shell's read returns at EOF), not by killing it.
// Every line the child wrote before it exited can still be read after
// Release: more than the reader buffers (5000 lines, 24 KB: the pipe takes
// them all and the child exits at once), so the reader is still
// reading when the child exits (with cmd.StdoutPipe, Wait closed the pipe
// under it and the last lines were lost).
func TestHeld(t *testing.T) {
	h := StartHeld(t, exec.Command("sh", "-c", "echo one; echo two; read x; echo after $?; seq 5000"))
	for _, want := range []string{"one", "two"} {
		if got := h.Line(t, time.Minute); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	h.Release()
	if !h.Cmd.ProcessState.Success() {
		t.Errorf("the child ended %v, want exit 0 at its stdin's end", h.Cmd.ProcessState)
	}
	if got := h.Line(t, time.Minute); got != "after 1" {
		t.Errorf("after Release the child said %q, want \"after 1\" (read at EOF)", got)
	}
	for i := 1; i <= 5000; i++ {
		if got, want := h.Line(t, time.Minute), fmt.Sprint(i); got != want {
			t.Fatalf("line %q after Release, want %q", got, want)
		}
	}
	h.Release() // again, at cleanup too: no second wait
}
