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
	mode := func() os.FileMode {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	if err := Write(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := mode(); m != 0o600 {
		t.Errorf("new file under umask 077: mode %o, want 600", m)
	}
	// A report an older kdiag (or the user) left readable to all is
	// written anew: the new one holds command lines and endpoints too.
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if m := mode(); m != 0o600 || string(b) != "two" {
		t.Errorf("rewritten 0644 file: mode %o content %q, want 600 and the new content", m, b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files in dir, want the report only", len(ents))
	}
}

// TestWriteMode writes a textfile for node_exporter under a restrictive
// umask, new and over a 0600 one: it is 0644 either way.
func TestWriteMode(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "kdiag.prom")
	for _, before := range []os.FileMode{0, 0o600} {
		if before != 0 {
			if err := os.Chmod(p, before); err != nil {
				t.Fatal(err)
			}
		}
		if err := WriteMode(p, []byte("x 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("WriteMode 0644 under umask 027 (file before: %o): %v, %v; want mode 644", before, st.Mode().Perm(), err)
		}
	}
}

// TestCreate creates a profile over a 0644 one: the new file is 0600 less
// the umask, and a symlink is followed, not replaced.
func TestCreate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "cpu.pprof")
	if err := os.WriteFile(p, []byte("old profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 || string(b) != "new" {
		t.Errorf("profile over a 0644 file: mode %o, content %q; want 600 and the new content", st.Mode().Perm(), b)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	f, err = Create(link, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Create through a symlink replaced the link: %v, %v", st.Mode(), err)
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
