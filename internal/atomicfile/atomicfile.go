// Package atomicfile writes files whole: into a temporary file beside the
// target, renamed over it, so that a reader (node_exporter, a browser, a
// ticket upload) never sees half a file and a kill -9 leaves the old one.
//
// The file is written anew, with the mode asked for, through the process's
// umask, whatever mode a file it replaces had: kdiag's reports hold command
// lines and endpoints, and a 0644 file left by an older kdiag or another tool
// must not keep them readable to all (issue 30). WriteMode is for the one
// file meant for another user's process. The temporary file's name,
// ".<base>.<pid>.<n>.tmp", carries the writer's pid, so that a later run can
// remove what a killed one left (CleanStale).
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

// Write writes data to path atomically, as a new file of mode perm less the
// umask, whatever the mode of the file it replaces.
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

// WriteMode is Write for a file another user's process reads, and that holds
// nothing it may not (node_exporter's textfile): the file gets exactly mode,
// the umask not applied, so that a restrictive umask (027) cannot make it
// unreadable to that process.
func WriteMode(path string, data []byte, mode fs.FileMode) error {
	return write(path, data, mode, true)
}

func write(path string, data []byte, perm fs.FileMode, exact bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp := filepath.Join(dir, tempName(base, os.Getpid(), seq.Add(1)))
	// Created with the mode it ends with (less the umask): the data is
	// never in a file more readable than that, not even for a moment.
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
	if exact {
		if err = f.Chmod(perm); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Create creates path anew for a file written as a stream, which cannot be
// written whole (a CPU profile): a regular file there is removed first, so
// the new one has mode perm less the umask, not the old file's. Unlike
// Write, a reader can see it half written.
func Create(path string, perm fs.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
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
