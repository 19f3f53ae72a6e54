package clients

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ThreadSample is one thread of a process at one moment, from
// /proc/<pid>/task/<tid>/{comm,stat,syscall,wchan} (proc(5)).
type ThreadSample struct {
	TID  int
	Name string // comm: at most 15 bytes of the thread's name
	// State is the one-letter state of stat (R running, S sleeping, D
	// uninterruptible, ...).
	State byte
	// Syscall is the number of the system call the thread is blocked in
	// (the first field of syscall), -1 when it is in none: running, or
	// blocked outside a system call. HasSyscall is false when syscall
	// could not be read (it needs ptrace access to the process).
	Syscall    int
	HasSyscall bool
	// Wchan is the kernel function the thread sleeps in ("" when running
	// or unreadable).
	Wchan string
}

// ReadThreads reads every thread of pid once. Threads that exit while it
// reads are skipped; a process that is gone is an error matching
// fs.ErrNotExist.
func ReadThreads(procRoot string, pid int) ([]ThreadSample, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "task")
	names, err := readDirNames(dir)
	if err != nil {
		return nil, fmt.Errorf("threads of process %d: %w", pid, err)
	}
	out := make([]ThreadSample, 0, len(names))
	for _, n := range names {
		tid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		t, err := readThread(filepath.Join(dir, n), tid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b ThreadSample) int { return a.TID - b.TID })
	return out, nil
}

func readThread(dir string, tid int) (ThreadSample, error) {
	t := ThreadSample{TID: tid, Syscall: -1}
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return t, err
	}
	t.Name = strings.TrimRight(string(comm), "\n")
	if st, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
		t.State, _ = parseStatState(st)
	}
	if sc, err := os.ReadFile(filepath.Join(dir, "syscall")); err == nil {
		if n, err := parseSyscall(sc); err == nil {
			t.Syscall, t.HasSyscall = n, true
		}
	}
	if w, err := os.ReadFile(filepath.Join(dir, "wchan")); err == nil {
		if s := strings.TrimSpace(string(w)); s != "0" {
			t.Wchan = s
		}
	}
	return t, nil
}

// parseStatState returns the state letter of a stat line: the field after
// the command name, which is in parentheses and may hold spaces and ")".
func parseStatState(b []byte) (byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("stat %q: no state after the command name", b)
	}
	return b[i+2], nil
}

// parseSyscall reads /proc/<pid>/task/<tid>/syscall: "running", "-1 sp pc"
// (blocked, not in a system call), or "nr arg1 ... arg6 sp pc".
func parseSyscall(b []byte) (int, error) {
	s := strings.TrimSpace(string(b))
	if s == "running" {
		return -1, nil
	}
	f, _, _ := strings.Cut(s, " ")
	n, err := strconv.Atoi(f)
	if err != nil {
		return 0, fmt.Errorf("syscall %q: want running or a number: %w", s, err)
	}
	return n, nil
}

// Thread states of a network thread.
const (
	// Polling: seen waiting in a poll-family call (epoll_wait, poll, ...)
	// in at least one sample: it comes back to its selector and can see a
	// FIN.
	Polling = "polling"
	// Busy: never seen polling, but running: working, not stuck.
	Busy = "busy"
	// Blocked: never seen polling nor running, waiting in something else
	// (a futex, a sleep, a read) in every sample.
	Blocked = "blocked"
	// Unknown: its system call could not be read.
	Unknown = "unknown"
)

// NetworkThread is one network thread over the samples.
type NetworkThread struct {
	TID   int    `json:"tid"`
	Name  string `json:"name"`
	State string `json:"state"`
	// Syscall and Wchan are the last sample's; SyscallName names the
	// number on this architecture ("" when not in a system call or not
	// known).
	Syscall     int    `json:"syscall"`
	SyscallName string `json:"syscall_name,omitempty"`
	Wchan       string `json:"wchan,omitempty"`
	// Seen counts the samples the thread was in.
	Seen int `json:"samples"`
}

// Threads is what the samples of one process show of its client's threads.
type Threads struct {
	// Samples is how many times the threads were read.
	Samples int `json:"samples"`
	// Instances is the number of client instances (threads with the
	// library's instance prefix) at the last sample, -1 when the library
	// starts no such thread; InstanceCounts has it per sample.
	Instances      int   `json:"instances"`
	InstanceCounts []int `json:"instance_counts,omitempty"`
	// Network are the network threads, by TID.
	Network []NetworkThread `json:"network_threads"`
}

// Classify reads the samples of one process (oldest first) for lib's
// threads: the instances at each sample, and each network thread's state
// over all of them. arch is the GOARCH whose system call numbers apply
// (runtime.GOARCH on the host). A nil lib or one without named threads
// gives Instances -1 and no network thread.
func Classify(lib *Library, samples [][]ThreadSample, arch string) Threads {
	out := Threads{Samples: len(samples), Instances: -1}
	if lib == nil || lib.Threads == nil {
		return out
	}
	tn := lib.Threads
	type acc struct {
		last                      ThreadSample
		polled, ran, known, total int
	}
	by := map[int]*acc{}
	var order []int
	for _, s := range samples {
		inst := 0
		for _, t := range s {
			if tn.Instance != "" && strings.HasPrefix(t.Name, tn.Instance) {
				inst++
			}
			if !strings.HasPrefix(t.Name, tn.Network) {
				continue
			}
			a := by[t.TID]
			if a == nil {
				a = &acc{}
				by[t.TID] = a
				order = append(order, t.TID)
			}
			a.last = t
			a.total++
			if t.HasSyscall {
				a.known++
				if IsPoll(arch, t.Syscall) {
					a.polled++
				}
			}
			if t.State == 'R' || (t.HasSyscall && t.Syscall == -1 && t.State != 'S' && t.State != 'D') {
				a.ran++
			}
		}
		if tn.Instance != "" {
			out.InstanceCounts = append(out.InstanceCounts, inst)
		}
	}
	if n := len(out.InstanceCounts); n > 0 {
		out.Instances = out.InstanceCounts[n-1]
	}
	slices.Sort(order)
	for _, tid := range order {
		a := by[tid]
		nt := NetworkThread{TID: tid, Name: a.last.Name, Syscall: a.last.Syscall, Wchan: a.last.Wchan, Seen: a.total}
		if a.last.HasSyscall {
			nt.SyscallName = SyscallName(arch, a.last.Syscall)
		}
		switch {
		case a.polled > 0:
			nt.State = Polling
		case a.ran > 0:
			nt.State = Busy
		case a.known == 0:
			nt.State = Unknown
		default:
			nt.State = Blocked
		}
		out.Network = append(out.Network, nt)
	}
	return out
}

// HostArch is the architecture whose system call numbers the host's
// /proc shows.
var HostArch = runtime.GOARCH

// syscallNames are the numbers of the calls a network thread is seen in,
// per architecture: arch/x86/entry/syscalls/syscall_64.tbl and
// syscall_32.tbl, and include/uapi/asm-generic/unistd.h for the
// architectures that use the generic table (arm64, riscv64, loong64). The
// maps are made on first use: a map literal is built by the package's
// init, which every kdiag command ran (issue 17).
var syscallNames = sync.OnceValue(func() map[string]map[int]string {
	return map[string]map[int]string{
		"amd64": {0: "read", 1: "write", 7: "poll", 23: "select", 35: "nanosleep", 44: "sendto", 45: "recvfrom",
			202: "futex", 230: "clock_nanosleep", 232: "epoll_wait", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 441: "epoll_pwait2"},
		"386": {3: "read", 4: "write", 142: "_newselect", 162: "nanosleep", 168: "poll", 240: "futex", 256: "epoll_wait",
			267: "clock_nanosleep", 308: "pselect6", 309: "ppoll", 319: "epoll_pwait", 441: "epoll_pwait2"},
		"generic": {22: "epoll_pwait", 63: "read", 64: "write", 72: "pselect6", 73: "ppoll", 98: "futex", 101: "nanosleep",
			115: "clock_nanosleep", 206: "sendto", 207: "recvfrom", 441: "epoll_pwait2"},
	}
})

func archTable(arch string) map[int]string {
	switch arch {
	case "amd64", "386":
		return syscallNames()[arch]
	case "arm64", "riscv64", "loong64":
		return syscallNames()["generic"]
	}
	return nil
}

// SyscallName names a system call number on arch, "" when unknown or -1.
func SyscallName(arch string, nr int) string { return archTable(arch)[nr] }

// IsPoll reports whether nr is a poll-family call on arch (epoll_wait,
// epoll_pwait, poll, ppoll, select, ...): what a selector loop waits in.
func IsPoll(arch string, nr int) bool {
	switch SyscallName(arch, nr) {
	case "poll", "select", "_newselect", "epoll_wait", "pselect6", "ppoll", "epoll_pwait", "epoll_pwait2":
		return true
	}
	return false
}
