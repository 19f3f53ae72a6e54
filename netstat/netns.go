package netstat

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNetNSUnavailable is wrapped by DumpNetlinkInNetNS's error when the
// namespace cannot be entered: setns(2) refused (EPERM without
// CAP_SYS_ADMIN), or its /proc/<pid>/ns/net could not be opened (EACCES for
// another user's process; fs.ErrNotExist, also checkable, when the process
// has exited). The scanner turns it into a note; /proc/<pid>/net/tcp of a
// process of that namespace (ReadProcNetTCP) may still be readable.
var ErrNetNSUnavailable = errors.New("network namespace cannot be entered")

// NetNSPath returns <procRoot>/<pid>/ns/net, the handle of pid's network
// namespace (pid 0: <procRoot>/self/ns/net, the caller's).
func NetNSPath(procRoot string, pid int) string {
	if pid == 0 {
		return filepath.Join(procRoot, "self", "ns", "net")
	}
	return filepath.Join(procRoot, strconv.Itoa(pid), "ns", "net")
}

// NetNSOf returns the inode number of pid's network namespace: st_ino of
// stat(<procRoot>/<pid>/ns/net), which follows the nsfs link (the number in
// its "net:[4026531840]" target) and costs no readlink parsing. Processes
// with the same number share one socket table. pid 0 is the caller.
//
// A process that has exited gives an error for which
// errors.Is(err, fs.ErrNotExist) holds; another user's process, when not
// root, fs.ErrPermission (the kernel's ptrace access check on ns links).
func NetNSOf(procRoot string, pid int) (uint64, error) {
	var st unix.Stat_t
	path := NetNSPath(procRoot, pid)
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("netstat: network namespace of pid %d: %w", pid, &fs.PathError{Op: "stat", Path: path, Err: err})
	}
	return st.Ino, nil
}

// GroupByNetNS groups pids by network namespace inode (NetNSOf), keeping
// their order, so that the scanner dumps each namespace once. Processes that
// have exited are left out. Processes whose namespace cannot be read (EACCES
// when not root) are grouped under key 0, "unknown", so that they can still
// be matched against the caller's namespace, where they most likely are.
//
// notes say, once each, what limited the grouping: how many processes
// exited, how many namespaces could not be read and what to do about it, and
// any other error, by pid.
func GroupByNetNS(procRoot string, pids []int) (groups map[uint64][]int, notes []string) {
	groups, notes, exited := groupByNetNS(procRoot, pids)
	if exited != "" {
		notes = append([]string{exited}, notes...)
	}
	return groups, notes
}

// groupByNetNS is GroupByNetNS with the note of the processes that exited
// apart, for the scanner's details (Snapshot.Details).
func groupByNetNS(procRoot string, pids []int) (groups map[uint64][]int, notes []string, exitedNote string) {
	groups = make(map[uint64][]int)
	var exited, denied int
	var deniedPIDs []string
	var other []string
	for _, pid := range pids {
		ns, err := NetNSOf(procRoot, pid)
		switch {
		case err == nil:
			groups[ns] = append(groups[ns], pid)
		case errors.Is(err, fs.ErrNotExist):
			exited++
		case errors.Is(err, fs.ErrPermission) && kernelThread(procRoot, pid):
			// A kernel thread holds no sockets.
		case errors.Is(err, fs.ErrPermission):
			denied++
			if len(deniedPIDs) < 5 {
				deniedPIDs = append(deniedPIDs, strconv.Itoa(pid))
			}
			groups[0] = append(groups[0], pid)
		default:
			other = append(other, err.Error())
			groups[0] = append(groups[0], pid)
		}
	}
	if exited > 0 {
		exitedNote = fmt.Sprintf("%d %s exited before %s network namespace could be read", exited, plural(exited, "process", "processes"), plural(exited, "its", "their"))
	}
	if denied > 0 {
		if denied > len(deniedPIDs) {
			deniedPIDs = append(deniedPIDs, "...")
		}
		notes = append(notes, fmt.Sprintf("cannot read the network namespace of %d %s (pid %s): permission denied; run as root to see the sockets of processes in other namespaces (containers)",
			denied, plural(denied, "process", "processes"), strings.Join(deniedPIDs, ", ")))
	}
	sort.Strings(other)
	if len(other) > maxReportedLines {
		other = append(other[:maxReportedLines], fmt.Sprintf("and %d more namespace errors", len(other)-maxReportedLines))
	}
	return groups, append(notes, other...), exitedNote
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
