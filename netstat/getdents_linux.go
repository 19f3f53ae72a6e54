package netstat

import "golang.org/x/sys/unix"

// getdents reads directory entries of fd into buf (getdents64(2)).
func getdents(fd int, buf []byte) (int, error) { return unix.Getdents(fd, buf) }
