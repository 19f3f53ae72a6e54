// Package fds counts a process's open file descriptors by kind (sockets,
// pipes, eventfds, epoll instances, files, ...) and reads its fd limit
// (RLIMIT_NOFILE, from /proc/<pid>/limits): what a client that leaks
// instances, sockets or wake pipes runs out of ("Too many open files").
//
// A census costs one readlink per fd (/proc/<pid>/fd/N names what the fd
// is: "socket:[123]", "pipe:[456]", "anon_inode:[eventpoll]", a path), so it
// is for the few processes kdiag doctor examines, not for every process on
// a host.
package fds

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Kind is what an fd is, as its /proc/<pid>/fd link names it.
type Kind string

// The kinds. Sockets are counted here whatever their protocol; kdiag doctor
// splits the TCP ones by state from its scan (Census.Sockets has their
// inodes).
const (
	Socket    Kind = "socket"
	Pipe      Kind = "pipe"
	EventFD   Kind = "eventfd"
	Epoll     Kind = "epoll"
	TimerFD   Kind = "timerfd"
	SignalFD  Kind = "signalfd"
	Inotify   Kind = "inotify"
	OtherAnon Kind = "other anon_inode"
	File      Kind = "file"
	Device    Kind = "device"
	Other     Kind = "other"
)

// Kinds lists every kind in the order a census is written.
var Kinds = []Kind{Socket, Pipe, EventFD, Epoll, TimerFD, SignalFD, Inotify, OtherAnon, File, Device, Other}

// Census is what one read of a process's fds found.
type Census struct {
	PID int `json:"pid"`
	// Open is the number of fds open.
	Open int `json:"open"`
	// Highest is the highest fd number open, -1 with none: select() takes
	// only fds below FD_SETSIZE (1024), whatever the count or the limit.
	Highest int `json:"highest_fd"`
	// ByKind counts them by Kind.
	ByKind map[Kind]int `json:"by_kind"`
	// Sockets are the inodes of its socket fds, sorted, to join with a
	// scan (which knows their protocol and state).
	Sockets []uint64 `json:"-"`
	// Soft and Hard are its RLIMIT_NOFILE ("Max open files" in
	// /proc/<pid>/limits); Unlimited stands for "unlimited".
	Soft uint64 `json:"soft_limit"`
	Hard uint64 `json:"hard_limit"`
}

// Unlimited is a limit /proc/<pid>/limits writes as "unlimited".
const Unlimited = math.MaxUint64

// Headroom is how many more fds the process may open before open() fails
// with EMFILE; false when its limit is unknown or unlimited.
func (c Census) Headroom() (int, bool) {
	if c.Soft == 0 || c.Soft == Unlimited {
		return 0, false
	}
	return max(int(c.Soft)-c.Open, 0), true
}

// Used is the share of the soft limit in use, 0 to 1; false when the
// limit is unknown or unlimited.
func (c Census) Used() (float64, bool) {
	if c.Soft == 0 || c.Soft == Unlimited {
		return 0, false
	}
	return float64(c.Open) / float64(c.Soft), true
}

// ErrParse is wrapped by the errors of the parsers.
var ErrParse = errors.New("fds: parse error")

// Read takes the census of pid under procRoot (/proc): readlink of every
// fd, and its limits. An fd closed while it is read is not counted; a
// process gone or whose fds are not readable is an error (errors.Is
// fs.ErrNotExist, fs.ErrPermission).
func Read(procRoot string, pid int) (Census, error) {
	dir := fmt.Sprintf("%s/%d", procRoot, pid)
	c := Census{PID: pid, ByKind: map[Kind]int{}, Highest: -1}
	f, err := os.Open(dir + "/fd")
	if err != nil {
		return c, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return c, err
	}
	for _, n := range names {
		link, err := os.Readlink(dir + "/fd/" + n)
		if err != nil {
			continue // closed meanwhile
		}
		k, ino := Classify(link)
		c.ByKind[k]++
		c.Open++
		if fd, err := strconv.Atoi(n); err == nil {
			c.Highest = max(c.Highest, fd)
		}
		if k == Socket {
			c.Sockets = append(c.Sockets, ino)
		}
	}
	slices.Sort(c.Sockets)
	lf, err := os.Open(dir + "/limits")
	if err != nil {
		return c, err
	}
	defer lf.Close()
	c.Soft, c.Hard, err = ParseLimits(lf)
	return c, err
}

// Classify names the kind of an fd from its /proc/<pid>/fd link, and for a
// socket its inode. The link forms are the kernel's: "socket:[ino]" and
// "pipe:[ino]" (sockfs and pipefs d_dname), "anon_inode:[eventpoll]",
// "anon_inode:[eventfd]", "anon_inode:[timerfd]", "anon_inode:[signalfd]",
// "anon_inode:inotify" (anon_inode_getfile's names), "/dev/..." and paths.
func Classify(link string) (Kind, uint64) {
	switch {
	case strings.HasPrefix(link, "socket:["):
		ino, _ := strconv.ParseUint(strings.TrimSuffix(link[len("socket:["):], "]"), 10, 64)
		return Socket, ino
	case strings.HasPrefix(link, "pipe:["):
		return Pipe, 0
	case strings.HasPrefix(link, "anon_inode:"):
		switch strings.Trim(link[len("anon_inode:"):], "[]") {
		case "eventpoll":
			return Epoll, 0
		case "eventfd":
			return EventFD, 0
		case "timerfd":
			return TimerFD, 0
		case "signalfd":
			return SignalFD, 0
		case "inotify":
			return Inotify, 0
		}
		return OtherAnon, 0
	case strings.HasPrefix(link, "/dev/"):
		return Device, 0
	case strings.HasPrefix(link, "/"):
		return File, 0
	}
	return Other, 0
}

// ParseLimits reads the "Max open files" soft and hard limits out of a
// /proc/<pid>/limits file (fs/proc/base.c, proc_pid_limits: a header, then
// one line a limit, its name padded to 25 columns, the soft and hard limits
// and the units).
func ParseLimits(r io.Reader) (soft, hard uint64, err error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		rest, ok := strings.CutPrefix(sc.Text(), "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("%w: limits line %d: %q: no soft and hard limit", ErrParse, line, sc.Text())
		}
		if soft, err = limit(f[0]); err == nil {
			hard, err = limit(f[1])
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%w: limits line %d: %q: %v", ErrParse, line, sc.Text(), err)
		}
		return soft, hard, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("%w: no \"Max open files\" line", ErrParse)
}

func limit(s string) (uint64, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	return strconv.ParseUint(s, 10, 64)
}
