package doctor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CountHeldClosed counts the TCP sockets process pid holds open that are in
// no kernel table: their inodes are not among known (the inodes of every
// socket a dump of all TCP states listed), and the socket's protocol is
// TCP. The protocol comes from sockfs's system.sockprotoname attribute
// ("TCP", "TCPv6", "UNIX-STREAM", ...: net/socket.c, sockfs_xattr_get),
// read through the /proc/<pid>/fd link, so no fd is taken from the
// process. Such a socket is in state CLOSE: reset (a keepalive probe to a
// peer that forgot it, the fate of a CLOSE_WAIT socket under keepalive) or
// never connected.
func CountHeldClosed(procRoot string, pid int, known map[uint64]bool) (int, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, err
	}
	n := 0
	buf := make([]byte, 64)
	for _, name := range names {
		link := filepath.Join(dir, name)
		t, err := os.Readlink(link)
		if err != nil {
			continue // closed meanwhile
		}
		ino, ok := socketInode(t)
		if !ok || known[ino] {
			continue
		}
		sz, err := unix.Getxattr(link, "system.sockprotoname", buf)
		if err != nil {
			continue
		}
		proto := strings.TrimRight(string(buf[:sz]), "\x00")
		if proto == "TCP" || proto == "TCPv6" {
			n++
		}
	}
	return n, nil
}

// socketInode reads "socket:[12345]".
func socketInode(t string) (uint64, bool) {
	s, ok := strings.CutPrefix(t, "socket:[")
	if !ok || !strings.HasSuffix(s, "]") {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
	return v, err == nil
}
