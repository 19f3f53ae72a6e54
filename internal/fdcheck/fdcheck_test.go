//go:build unix

package fdcheck

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kdiag/kdiag/internal/cmdutil"
)

func TestMessage(t *testing.T) {
	if exitUnknown != cmdutil.ExitUnknown {
		t.Errorf("exitUnknown = %d, want cmdutil.ExitUnknown (%d)", exitUnknown, cmdutil.ExitUnknown)
	}
	tests := []struct {
		limit uint64
		open  int
		want  string // "" or a part of the message
	}{
		{6, 5, "the open-file limit (ulimit -n) is 6 and 5 descriptors are open: kdiag needs 3 free to start (the Go runtime takes 2 at the first open), and has 1. Raise the limit, e.g. ulimit -n 1024.\n"},
		{7, 5, "and has 2."},
		{8, 5, ""},
		{1024, 5, ""},
	}
	for _, tt := range tests {
		got := message(tt.limit, tt.open)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("message(%d, %d) = %q, want it to say %q", tt.limit, tt.open, got, tt.want)
		}
	}
}

// TestCheckCounts fills the process's descriptors up to a soft limit of
// 64, then frees two: check says 62 are open and 2 free.
func TestCheckCounts(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max < 64 {
		t.Skipf("limit %+v: %v", lim, err)
	}
	if got := check(); got != "" {
		t.Errorf("check() under a limit of %d = %q, want \"\"", lim.Cur, got)
	}
	low := lim
	low.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	var fds []int
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for {
		fd, err := syscall.Dup(0)
		if err != nil {
			if err != syscall.EMFILE {
				t.Fatal(err)
			}
			break
		}
		fds = append(fds, fd)
	}
	for range 2 {
		syscall.Close(fds[len(fds)-1])
		fds = fds[:len(fds)-1]
	}
	if got, want := check(), "is 64 and 62 descriptors are open: kdiag needs 3 free to start (the Go runtime takes 2 at the first open), and has 2."; !strings.Contains(got, want) {
		t.Errorf("check() = %q, want it to say %q", got, want)
	}
}

func TestItoa(t *testing.T) {
	for _, n := range []int{0, 7, 10, 1024, 1<<31 - 1} {
		if got := itoa(n); got != strconv.Itoa(n) {
			t.Errorf("itoa(%d) = %q", n, got)
		}
	}
}
