package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestWriteModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "report.html")
	if err := Write(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("new file under umask 077: mode %o, want 600", st.Mode().Perm())
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 || string(b) != "two" {
		t.Errorf("rewritten file: mode %o content %q, want the mode the user set (640) and the new content", st.Mode().Perm(), b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files in dir, want the report only", len(ents))
	}
}

// TestCleanStale leaves a temporary file as a killed writer would (a pid
// that is not running), one of a live writer, one of the old naming and
// other files: only the dead writer's and the old one go.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	// A pid that surely ran and is gone: a reaped child's.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := cmd.Process.Pid
	files := map[string]time.Duration{
		tempName("kdiag.prom", dead, 1):        0,
		tempName("kdiag.prom", os.Getpid(), 2): 0,
		tempName("kdiag.prom", 1, 3):           0, // init: running
		"kdiag.prom1759449241":                 2 * time.Hour,
		"kdiag.prom1759449999":                 0, // young: may be an old kdiag's write in progress
		"kdiag.prom":                           0,
		"node.prom":                            0,
	}
	for name, age := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if age > 0 {
			if err := os.Chtimes(p, time.Now().Add(-age), time.Now().Add(-age)); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed, err := CleanStale(dir, "kdiag.prom")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{tempName("kdiag.prom", dead, 1), "kdiag.prom1759449241"}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
}
