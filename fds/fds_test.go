package fds

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		file       string
		soft, hard uint64
		wantErr    bool
	}{
		{"testdata/limits", 20000, 20000, false},
		{"testdata/limits_unlimited", Unlimited, Unlimited, false},
		{"testdata/limits_truncated", 0, 0, true},
		{"testdata/limits_broken", 0, 0, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			soft, hard, err := ParseLimits(f)
			if (err != nil) != tc.wantErr || tc.wantErr && !errors.Is(err, ErrParse) {
				t.Fatalf("err %v, want error %v (wrapping ErrParse)", err, tc.wantErr)
			}
			if soft != tc.soft || hard != tc.hard {
				t.Errorf("soft %d hard %d, want %d %d", soft, hard, tc.soft, tc.hard)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for link, want := range map[string]Kind{
		"socket:[123]":           Socket,
		"pipe:[456]":             Pipe,
		"anon_inode:[eventpoll]": Epoll,
		"anon_inode:[eventfd]":   EventFD,
		"anon_inode:[timerfd]":   TimerFD,
		"anon_inode:[signalfd]":  SignalFD,
		"anon_inode:inotify":     Inotify,
		"anon_inode:[io_uring]":  OtherAnon,
		"/dev/null":              Device,
		"/var/log/app.log":       File,
		"/memfd:jit (deleted)":   File,
		"net:[4026531840]":       Other,
	} {
		if got, _ := Classify(link); got != want {
			t.Errorf("Classify(%q) = %s, want %s", link, got, want)
		}
	}
	if _, ino := Classify("socket:[98765]"); ino != 98765 {
		t.Errorf("socket inode %d, want 98765", ino)
	}
}

// TestReadCountsWhatWasOpened: the census of this process counts exactly
// the pipes, epoll instances, eventfds and sockets the test opens, and its
// limit is what getrlimit says.
func TestReadCountsWhatWasOpened(t *testing.T) {
	before, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var opened []int
	for range 3 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		opened = append(opened, p[0], p[1])
	}
	for range 2 {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, fd)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	sfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	opened = append(opened, efd, sfd)
	defer func() {
		for _, fd := range opened {
			unix.Close(fd)
		}
	}()
	after, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got := map[Kind]int{}
	for _, k := range Kinds {
		if d := after.ByKind[k] - before.ByKind[k]; d != 0 {
			got[k] = d
		}
	}
	// The Go runtime may open or close fds of its own meanwhile (netpoll's
	// epoll and eventfd are opened once, before the first census).
	want := map[Kind]int{Pipe: 6, Epoll: 2, EventFD: 1, Socket: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("census difference (-want +got):\n%s", d)
	}
	if after.Open-before.Open != 10 {
		t.Errorf("open fds grew by %d, want 10", after.Open-before.Open)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if after.Soft != rl.Cur || after.Hard != rl.Max {
		t.Errorf("limits %d/%d, getrlimit says %d/%d", after.Soft, after.Hard, rl.Cur, rl.Max)
	}
	if h, ok := after.Headroom(); !ok || h != int(rl.Cur)-after.Open {
		t.Errorf("headroom %d %v, want %d", h, ok, int(rl.Cur)-after.Open)
	}
}

func TestReadGoneProcess(t *testing.T) {
	if _, err := Read("/proc", 1<<30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pid that is not there: %v, want fs.ErrNotExist", err)
	}
}

func FuzzParseLimits(f *testing.F) {
	for _, name := range []string{"testdata/limits", "testdata/limits_unlimited", "testdata/limits_truncated", "testdata/limits_broken"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, err := ParseLimits(bytes.NewReader(b))
		if err != nil && !errors.Is(err, ErrParse) && !errors.Is(err, bufio.ErrTooLong) {
			t.Fatalf("error %v does not wrap ErrParse", err)
		}
		if err == nil && !bytes.Contains(b, []byte("Max open files")) {
			t.Fatalf("limits read from input with no \"Max open files\" line: %q", b)
		}
	})
}

// TestReadHighest: an fd moved past select()'s FD_SETSIZE (1024) is the
// census's highest, whatever the count of fds open.
func TestReadHighest(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	const high = 1500
	if rl.Cur <= high {
		t.Skipf("RLIMIT_NOFILE %d: fd %d cannot be opened", rl.Cur, high)
	}
	before, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.Highest < 2 || before.Highest >= high {
		t.Fatalf("highest fd %d before, want at least stderr's 2 and below %d", before.Highest, high)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if err := unix.Dup3(p[0], high, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(high)
	after, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.Highest != high {
		t.Errorf("highest fd %d, want %d", after.Highest, high)
	}
}
