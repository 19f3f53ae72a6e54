package lint

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/cmdutil"
)

// TestNonexistentIsAnError: a path that does not exist is an error, exit 2,
// said on standard error with the kdiag: prefix main gives every other
// error, and nothing on standard output ("no findings in 0 files" read as a
// pass).
func TestNonexistentIsAnError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexistent")
	code, out, errOut := run(t, "", nil, missing)
	if code != cmdutil.ExitUsage {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitUsage)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	if want := "kdiag: lint: " + missing + ": no such file or directory\n"; errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	// With a readable input beside it, that one is still linted and
	// reported, and the run still exits 2.
	code, out, errOut = run(t, "", nil, missing, td("clean.properties"))
	if code != cmdutil.ExitUsage || out != "no findings in 1 file\n" || !strings.HasPrefix(errOut, "kdiag: lint: ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// lintWithin runs kdiag lint and fails the test, rather than hang it, when
// the run does not end within a minute: a FIFO that is opened for reading
// blocks until a writer comes, which here never does.
func lintWithin(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	type result struct {
		code       int
		out, errOu string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := run(t, "", nil, args...)
		done <- result{c, o, e}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.errOu
	case <-time.After(time.Minute):
		t.Fatalf("kdiag lint %v did not return within a minute: it blocks on the FIFO", args)
	}
	return 0, "", ""
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// TestFIFOArgument: a FIFO given as an argument is an error that says what
// it is, at once.
func TestFIFOArgument(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "producer.properties")
	mkfifo(t, fifo)
	code, out, errOut := lintWithin(t, fifo)
	if code != cmdutil.ExitUsage || out != "" {
		t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
	}
	want := "kdiag: lint: " + fifo + ": is a named pipe (FIFO), not a regular file (give - to read standard input)\n"
	if errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
}

// TestFIFOInDirectory: a walk reads only regular files; a FIFO named like a
// configuration file is skipped with a note, and the rest is linted.
func TestFIFOInDirectory(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "a.properties"))
	if err := os.WriteFile(filepath.Join(dir, "b.properties"), []byte("bootstrap.servers=k1:9092,k2:9092\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link to the FIFO is no better than the FIFO.
	if err := os.Symlink("a.properties", filepath.Join(dir, "c.properties")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := lintWithin(t, dir)
	if code != 0 || out != "no findings in 1 file\n" {
		t.Errorf("exit %d, stdout %q; want 0 and the one regular file linted", code, out)
	}
	for _, name := range []string{"a.properties", "c.properties"} {
		want := "kdiag: lint: " + filepath.Join(dir, name) + ": skipped: a named pipe (FIFO), not a regular file\n"
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not say %q", errOut, want)
		}
	}
}

// TestReadRegularRefusesFIFO: the reader itself refuses a FIFO without
// blocking, should one replace a file between the walk and the read.
func TestReadRegularRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "p.properties")
	mkfifo(t, fifo)
	done := make(chan error, 1)
	go func() { _, err := readRegular(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("readRegular(FIFO) = %v, want a not-a-regular-file error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("readRegular blocked on a FIFO")
	}
}

// TestStderrEscapesControlCharacters: a path with an escape sequence in it
// is written escaped on standard error.
func TestStderrEscapesControlCharacters(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "x\x1b]0;owned\x07.properties")
	_, _, errOut := run(t, "", nil, bad)
	if strings.ContainsAny(errOut, "\x1b\x07") || !strings.Contains(errOut, `x\x1b]0;owned\x07.properties`) {
		t.Errorf("stderr %q: want the control characters escaped", errOut)
	}
}

// TestNoConfigurationFound: a file named on the command line in which
// nothing is a producer's configuration (a log without a ProducerConfig
// block) is linted and passes, with a note saying nothing was found.
func TestNoConfigurationFound(t *testing.T) {
	log := filepath.Join(t.TempDir(), "app.log")
	if err := os.WriteFile(log, []byte("INFO started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", nil, log)
	if code != 0 || out != "no findings in 1 file\n" || !strings.Contains(errOut, log+": no producer configuration found in it") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestParseErrorNamedOnce: a parser's error that says path:line:col is
// printed once with its position, not after the path again; invalid UTF-8
// in a YAML file at the line of the byte (issue 30: 1:1 when it was on line
// 4).
func TestParseErrorNamedOnce(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "application.yml")
	if err := os.WriteFile(bad, []byte("spring:\n  kafka:\n    producer:\n      acks: \"\xff\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "", nil, bad)
	want := "kdiag: lint: " + bad + ":4:14: invalid UTF-8 (byte 0xff)"
	if code != cmdutil.ExitUsage || !strings.HasPrefix(errOut, want) {
		t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
	}
}
