// Package atomicfile writes files whole: into a temporary file beside the
// target, renamed over it, so that a reader (node_exporter, a browser, a
// ticket upload) never sees half a file and a kill -9 leaves the old one.
//
// The temporary file is created with the mode asked for, through the
// process's umask, so kdiag never makes a file more readable than the user
// allows; a target that exists keeps its own mode (the user chose it). Its
// name, ".<base>.<pid>.<n>.tmp", carries the writer's pid, so that a later
// run can remove what a killed one left (CleanStale).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

var seq atomic.Uint64

// tempName is the temporary file's name for target base, written by pid.
func tempName(base string, pid int, n uint64) string {
	return "." + base + "." + strconv.Itoa(pid) + "." + strconv.FormatUint(n, 10) + ".tmp"
}

// Write writes data to path atomically. A new file gets perm (less the
// umask); an existing one keeps its mode.
func Write(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	existing := false
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		perm, existing = st.Mode().Perm(), true
	}
	tmp := filepath.Join(dir, tempName(base, os.Getpid(), seq.Add(1)))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if existing {
		// The target's mode, which the umask must not narrow.
		if err = f.Chmod(perm); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// CleanStale removes from dir the temporary files that Write left for base
// when its writer was killed between create and rename: those whose writer
// pid is no longer running. It also removes, for compatibility, the names
// os.CreateTemp gave them before ("<base><digits>"), when older than an
// hour. It returns the names removed.
func CleanStale(dir, base string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !stale(dir, base, name) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// stale reports whether name in dir is a leftover temporary file for base.
func stale(dir, base, name string) bool {
	if rest, ok := strings.CutPrefix(name, "."+base+"."); ok {
		pidS, _, ok := strings.Cut(rest, ".")
		pid, err := strconv.Atoi(pidS)
		if !ok || err != nil || !strings.HasSuffix(rest, ".tmp") {
			return false
		}
		return pid != os.Getpid() && !running(pid)
	}
	if digits, ok := strings.CutPrefix(name, base); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
		st, err := os.Stat(filepath.Join(dir, name))
		return err == nil && time.Since(st.ModTime()) > time.Hour
	}
	return false
}

// running reports whether a process pid exists (signal 0: EPERM means it
// exists under another user).
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Describe says what CleanStale removed, for a note; "" when nothing.
func Describe(dir string, removed []string) string {
	if len(removed) == 0 {
		return ""
	}
	return fmt.Sprintf("removed %d temporary file(s) a killed kdiag left in %s: %s", len(removed), dir, strings.Join(removed, ", "))
}
