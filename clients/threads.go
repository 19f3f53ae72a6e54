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

// Thread states of a network thread: what one sample shows, and what the
// thread is called over all of them (Classify says by which rule).
const (
	// Polling: waiting in a poll-family call (epoll_wait, poll, ...): the
	// thread is back at its selector, where it sees a FIN.
	Polling = "polling"
	// Busy: running (or runnable): working, not waiting.
	Busy = "busy"
	// Blocked: waiting in something else (a futex, a sleep, a read), or
	// asleep outside any system call.
	Blocked = "blocked"
	// Unknown: its system call could not be read (that needs ptrace
	// access to the process) and it was not running.
	Unknown = "unknown"
)

// NetworkThread is one network thread over the samples. Its State and its
// system call come from the same samples: StateSamples of the Seen samples
// gave State, and SyscallSamples of those were in Syscall.
type NetworkThread struct {
	TID   int    `json:"tid"`
	Name  string `json:"name"`
	State string `json:"state"`
	// Syscall is the system call most of the samples that gave State were
	// in (a tie goes to the later sample's), -1 for none (running, or
	// asleep outside a system call); SyscallName names it on this
	// architecture ("" when -1 or not known); Wchan is the wait channel of
	// the latest of those samples in Syscall.
	Syscall     int    `json:"syscall"`
	SyscallName string `json:"syscall_name,omitempty"`
	Wchan       string `json:"wchan,omitempty"`
	// Seen counts the samples the thread was in.
	Seen int `json:"samples"`
	// StateSamples counts the samples that gave State; SyscallSamples
	// those of them in Syscall.
	StateSamples   int `json:"state_samples"`
	SyscallSamples int `json:"syscall_samples"`
	// Tally is every (state, system call) the samples showed, the most
	// samples first: what the thread did besides State.
	Tally []ThreadTally `json:"tally"`
}

// ThreadTally is how many samples showed a thread in one state and system
// call.
type ThreadTally struct {
	State       string `json:"state"`
	Syscall     int    `json:"syscall"`
	SyscallName string `json:"syscall_name,omitempty"`
	Samples     int    `json:"samples"`
}

// Words says what the thread was seen doing, with the counts it rests on:
// "polling in epoll_wait 5/5", "blocked in futex 4/5 (busy, running
// 1/5)", "polling in epoll_wait 1/5 (blocked in futex 4/5)". The first
// part is State and its system call; the parenthesis lists what the other
// samples showed.
func (t NetworkThread) Words() string {
	s := tallyWords(t.State, t.Syscall, t.SyscallName, t.SyscallSamples, t.Seen)
	if t.SyscallSamples != t.StateSamples {
		// The state's samples were in more than one call: say how many
		// were in the state at all.
		s = fmt.Sprintf("%s %d/%d, %s", t.State, t.StateSamples, t.Seen, strings.TrimPrefix(s, t.State+" "))
	}
	var rest []string
	for _, k := range t.Tally {
		if k.State == t.State && k.Syscall == t.Syscall {
			continue
		}
		rest = append(rest, tallyWords(k.State, k.Syscall, k.SyscallName, k.Samples, t.Seen))
	}
	if len(rest) > 0 {
		s += " (" + strings.Join(rest, ", ") + ")"
	}
	return s
}

// tallyWords writes one state and call with its count: "blocked in futex
// 5/5", "busy, running 2/5", "blocked outside a system call 1/5",
// "unknown, system call unreadable 5/5".
func tallyWords(state string, nr int, name string, n, of int) string {
	var where string
	switch {
	case state == Unknown:
		where = ", system call unreadable"
	case nr < 0 && state == Busy:
		where = ", running"
	case nr < 0:
		where = " outside a system call"
	case name != "":
		where = " in " + name
	default:
		where = fmt.Sprintf(" in system call %d", nr)
	}
	return fmt.Sprintf("%s%s %d/%d", state, where, n, of)
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

// sampleState is what one sample shows of a thread: Polling when it waits
// in a poll-family call; Busy when it is running (state R, or a syscall
// file that says "running" while stat says neither S nor D); Unknown when
// its system call could not be read; Blocked otherwise.
func sampleState(t ThreadSample, arch string) (state string, nr int) {
	switch {
	case t.HasSyscall && IsPoll(arch, t.Syscall):
		return Polling, t.Syscall
	case t.State == 'R' || (t.HasSyscall && t.Syscall == -1 && t.State != 'S' && t.State != 'D'):
		return Busy, t.Syscall
	case !t.HasSyscall:
		return Unknown, -1
	}
	return Blocked, t.Syscall
}

// Classify reads the samples of one process (oldest first) for lib's
// threads: the instances at each sample, and each network thread's state
// over all of them. arch is the GOARCH whose system call numbers apply
// (runtime.GOARCH on the host). A nil lib or one without named threads
// gives Instances -1 and no network thread.
//
// The rule: a thread seen polling in any sample is Polling; any other
// thread is what most of its samples show (Busy, Blocked or Unknown; a tie
// goes to the state of the later sample). Its system call is the one most
// of the samples of that state were in, so state and call never come from
// different samples, and both carry their counts (NetworkThread.Words).
//
// Why one polling sample is enough: the selectors these threads poll in
// (Java's epoll Selector, librdkafka's poll) are level-triggered, and
// /proc shows a thread in epoll_wait or poll only while it sleeps there,
// which it does only when none of its registered sockets is readable. A
// socket holding an unread FIN is readable, so a thread seen sleeping in
// its poll call had read every FIN that had reached its sockets by then.
// That is what was measured: a Java network thread that polls reads the
// broker's FIN within 0-59 ms and closes (kafka-clients 2.1.1 and 3.9.0
// against kdiag broker), and CLOSE_WAIT lasted exactly as long as a send
// callback blocked the thread, every sample of which was in a futex. A
// majority rule would call a thread that polls between slow callbacks
// (blocked 4 samples of 5) blocked, and blame it for CLOSE_WAIT older than
// the samples that it cannot be holding; the tally still says how much of
// the time it spent elsewhere.
func Classify(lib *Library, samples [][]ThreadSample, arch string) Threads {
	out := Threads{Samples: len(samples), Instances: -1}
	if lib == nil || lib.Threads == nil {
		return out
	}
	tn := lib.Threads
	by := map[int][]seen{}
	for _, s := range samples {
		inst := 0
		for _, t := range s {
			if tn.Instance != "" && strings.HasPrefix(t.Name, tn.Instance) {
				inst++
			}
			if !strings.HasPrefix(t.Name, tn.Network) {
				continue
			}
			st, nr := sampleState(t, arch)
			by[t.TID] = append(by[t.TID], seen{state: st, nr: nr, t: t})
		}
		if tn.Instance != "" {
			out.InstanceCounts = append(out.InstanceCounts, inst)
		}
	}
	if n := len(out.InstanceCounts); n > 0 {
		out.Instances = out.InstanceCounts[n-1]
	}
	tids := make([]int, 0, len(by))
	for tid := range by {
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	for _, tid := range tids {
		ss := by[tid]
		states := make([]string, len(ss))
		for i, s := range ss {
			states[i] = s.state
		}
		state := Polling
		if !slices.Contains(states, Polling) {
			state = majority(states)
		}
		var calls []int
		for _, s := range ss {
			if s.state == state {
				calls = append(calls, s.nr)
			}
		}
		nr := majority(calls)
		nt := NetworkThread{TID: tid, Name: ss[len(ss)-1].t.Name, State: state, Syscall: nr,
			SyscallName: SyscallName(arch, nr), Seen: len(ss), StateSamples: len(calls)}
		for _, s := range ss {
			if s.state == state && s.nr == nr {
				nt.SyscallSamples++
				nt.Wchan = s.t.Wchan
			}
		}
		nt.Tally = tally(ss, arch)
		out.Network = append(out.Network, nt)
	}
	return out
}

// majority returns the value most of vs hold; a tie goes to the one that
// occurs last. vs is not empty.
func majority[T comparable](vs []T) T {
	count := map[T]int{}
	best, bestN := vs[len(vs)-1], 0
	for _, v := range vs {
		count[v]++
	}
	// From the end, so that among equal counts the later one is met first.
	for i := len(vs) - 1; i >= 0; i-- {
		if n := count[vs[i]]; n > bestN {
			best, bestN = vs[i], n
		}
	}
	return best
}

// stateOrder sorts a tally's equal counts: polling first, as Words names it.
var stateOrder = map[string]int{Polling: 0, Busy: 1, Blocked: 2, Unknown: 3}

// seen is one sample of a thread with its state and call (sampleState).
type seen struct {
	state string
	nr    int
	t     ThreadSample
}

// tally counts the (state, call) pairs of a thread's samples, the most
// samples first, then by state and call.
func tally(ss []seen, arch string) []ThreadTally {
	var out []ThreadTally
	for _, s := range ss {
		i := slices.IndexFunc(out, func(k ThreadTally) bool { return k.State == s.state && k.Syscall == s.nr })
		if i < 0 {
			out = append(out, ThreadTally{State: s.state, Syscall: s.nr, SyscallName: SyscallName(arch, s.nr)})
			i = len(out) - 1
		}
		out[i].Samples++
	}
	slices.SortFunc(out, func(a, b ThreadTally) int {
		if a.Samples != b.Samples {
			return b.Samples - a.Samples
		}
		if a.State != b.State {
			return stateOrder[a.State] - stateOrder[b.State]
		}
		return a.Syscall - b.Syscall
	})
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
