package watch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kdiag/kdiag/internal/cmd/scan"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/netstat"
	"golang.org/x/sys/unix"
)

// Thresholds are --warn and --crit: the CLOSE_WAIT (plus held CLOSE)
// sockets of one process above which the watch ends WARNING or CRITICAL; a
// negative one is not given.
type Thresholds struct {
	Warn, Crit int
}

// checker is the monitoring check of a watch with --warn or --crit: scan's
// check (scan.Check) of its last scan, which the watch prints before its
// findings and exits with. Its methods do nothing on a nil checker (no
// thresholds: no check).
type checker struct {
	t    Thresholds
	code int
	line string
}

func newChecker(t *Thresholds) *checker {
	if t == nil {
		return nil
	}
	return &checker{t: *t, code: cmdutil.ExitUnknown, line: "KDIAG UNKNOWN - stopped before the first scan"}
}

// scanned checks s, the last scan so far (before the loop recycles it).
func (c *checker) scanned(s *netstat.Snapshot) {
	if c != nil {
		c.code, c.line = scan.Check(s, c.t.Warn, c.t.Crit)
	}
}

// failed records a failed scan: the check does not know what the host
// holds now, whatever the scans before saw.
func (c *checker) failed(err error) {
	if c != nil {
		c.code, c.line = cmdutil.ExitUnknown, fmt.Sprintf("KDIAG UNKNOWN - the last scan failed: %v", err)
	}
}

// result prints the summary line to w and returns the exit error (nil for
// OK).
func (c *checker) result(w io.Writer) error {
	fmt.Fprintln(w, c.line)
	if c.code == cmdutil.ExitOK {
		return nil
	}
	return cmdutil.Exit(c.code)
}

// checkReportPath says, before a watch that may last hours, why --report
// could not be written at its end: the directory it goes in is missing,
// not a directory or not writable, or the path is a directory. (At the
// end, the report is written to a temporary file beside it, renamed.)
func checkReportPath(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory; name the report file, e.g. %s", path, filepath.Join(path, "watch.html"))
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	return nil
}
