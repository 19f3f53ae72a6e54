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
// descriptors free.
func check() string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return ""
	}
	// Above a few thousand, what is open cannot leave fewer than Need
	// free, and counting would cost a system call per descriptor.
	if lim.Cur >= 4096 {
		return ""
	}
	open := 0
	for fd := 0; fd < int(lim.Cur); fd++ {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != syscall.EBADF {
			open++
		}
	}
	return message(lim.Cur, open)
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
