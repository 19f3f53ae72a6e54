package netstat

import (
	"os"
	"path/filepath"
	"strconv"
)

// FDHolds says whether process pid's descriptor fd is still the socket of
// inode: one readlink of <procRoot>/<pid>/fd/<fd>. A process that exited,
// an fd closed or reused for another file, or a link kdiag may not read
// all say false.
func FDHolds(procRoot string, pid, fd int, inode uint64) bool {
	l, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(pid), "fd", strconv.Itoa(fd)))
	return err == nil && l == "socket:["+strconv.FormatUint(inode, 10)+"]"
}

// HeldClose lists the held CLOSE sockets of s: state CLOSE, with the fd
// and inode that hold them.
func (s *Snapshot) HeldClose() []Socket {
	var out []Socket
	for _, k := range s.Sockets {
		if k.heldClose() {
			out = append(out, k)
		}
	}
	return out
}

// DropReleased removes from s the held CLOSE sockets whose fd no longer
// holds them (holds says false) and returns how many it removed, by pid.
// A socket in CLOSE whose fd the process is about to close is not held:
// Java NIO, for one, shuts a channel registered with a Selector down at
// close() and releases its fd only at the selector's next select, so a
// scan that lands in between sees a CLOSE socket with an fd for a few
// milliseconds. Checking the fds again a moment after the scan (the
// caller waits) tells that close in progress from a held one.
func (s *Snapshot) DropReleased(holds func(pid, fd int, inode uint64) bool) map[int]int {
	var gone map[int]int
	kept := s.Sockets[:0]
	for _, k := range s.Sockets {
		if k.heldClose() && !holds(k.PID, k.FD, k.Inode) {
			if gone == nil {
				gone = map[int]int{}
			}
			gone[k.PID]++
			continue
		}
		kept = append(kept, k)
	}
	clear(s.Sockets[len(kept):])
	s.Sockets = kept
	return gone
}

// heldClose says whether k is a socket in CLOSE that a process's fd holds.
func (k *Socket) heldClose() bool {
	return k.State == Close && k.PID > 0 && k.FD >= 0 && k.Inode != 0
}
