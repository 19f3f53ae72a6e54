//go:build unix

package fdcheck

import "syscall"

func init() {
	if msg := check(); msg != "" {
		// fd 2 may be closed too: nothing else can be said then.
		_, _ = syscall.Write(2, []byte(msg))
		syscall.Exit(exitUnknown)
	}
}

// check returns the message to stop with, "" when the limit leaves Need
// descriptors free. It looks at descriptors from 0 up and stops at the
// Need-th free one: a few fstat calls at a normal start (0-2 and the
// runtime's cgroup files open, the next free), all of them below the limit
// only when it fails.
func check() string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return ""
	}
	free := 0
	for fd := uint64(0); fd < lim.Cur && free < Need; fd++ {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) == syscall.EBADF {
			free++
		}
	}
	if free >= Need {
		return ""
	}
	return message(lim.Cur, int(lim.Cur)-free)
}

// message says why kdiag stops with a limit of limit descriptors, open of
// them in use; "" when Need are free.
func message(limit uint64, open int) string {
	free := int(limit) - open
	if free >= Need {
		return ""
	}
	return "kdiag: the open-file limit (ulimit -n) is " + itoa(int(limit)) + " and " + itoa(open) +
		" descriptors are open: kdiag needs " + itoa(Need) + " free to start (the Go runtime takes 2 at the first open)," +
		" and has " + itoa(max(free, 0)) + ". Raise the limit, e.g. ulimit -n 1024.\n"
}

// itoa formats n (0 or more) in decimal: strconv would be one more import
// to initialise first (see the package comment).
func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
