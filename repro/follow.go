// Following a command and every process it starts: the processes whose
// sockets `kdiag repro -- CMD` samples, and that it stops at the end.

package repro

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kdiag/kdiag/internal/redact"
)

// MarkerVar is the environment variable `kdiag repro -- CMD` sets for CMD,
// which every process it starts inherits unless it clears its
// environment: its value names the run, so that a process CMD started and
// let go (a daemon that forked twice and was reparented to init before a
// sample saw it) is still found, followed and stopped.
const MarkerVar = "KDIAG_REPRO_RUN"

// statInfo is what tree reads of /proc/<pid>/stat (proc(5)): the state
// (field 3), the parent pid (field 4) and the start time in clock ticks
// since boot (field 22), which tells a process from a later one that got
// its pid.
type statInfo struct {
	state byte // field 3: R, S, D, Z (a zombie: exited, not yet reaped), ...
	ppid  int
	start uint64
}

// parseStat reads a /proc/<pid>/stat line. The command name (field 2) is
// in parentheses and may hold spaces and parentheses itself: the fields
// after it are counted from its last ')'.
func parseStat(b []byte) (statInfo, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statInfo{}, errors.New("stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): the parent is f[1], the start time f[19].
	if len(f) < 20 {
		return statInfo{}, fmt.Errorf("stat: %d fields after the command name, want at least 20", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return statInfo{}, fmt.Errorf("stat: parent pid %q: %w", f[1], err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return statInfo{}, fmt.Errorf("stat: start time %q: %w", f[19], err)
	}
	return statInfo{state: f[0][0], ppid: ppid, start: start}, nil
}

// Proc is one process of the followed tree, as the result reports it.
type Proc struct {
	PID  int `json:"pid"`
	PPID int `json:"ppid"`
	// Command is its command line, secrets masked (redact.Args).
	Command []string `json:"command"`
	// SeenMS and GoneMS are when a sample first found it and found it
	// gone, in ms since CMD started; GoneMS is -1 while it runs.
	SeenMS int64 `json:"seen_ms"`
	GoneMS int64 `json:"gone_ms"`
	// Found says how it was found: "command" (CMD itself), "child of N",
	// or "by its environment" (MarkerVar, once its parent had let it go).
	Found string `json:"found"`
}

// tree is CMD and every process started from it: followed by parent pid at
// each refresh, and by MarkerVar in the environment now and then, so
// that one whose parent let it go is kept. A process is known by its pid
// and start time, never confused with a later one of the same pid.
type tree struct {
	procRoot string
	marker   string // MarkerVar=value
	started  time.Time

	mu    sync.Mutex
	procs map[int]*treeProc
	order []int // pids in the order found
}

type treeProc struct {
	Proc
	start uint64
	alive bool
}

func newTree(procRoot string, root int, marker string, started time.Time) *tree {
	t := &tree{procRoot: procRoot, marker: marker, started: started, procs: map[int]*treeProc{}}
	t.add(root, 0, 0, "command")
	return t
}

func (t *tree) add(pid, ppid int, start uint64, found string) {
	tp := &treeProc{Proc: Proc{PID: pid, PPID: ppid, SeenMS: time.Since(t.started).Milliseconds(), GoneMS: -1, Found: found},
		start: start, alive: true}
	if b, err := os.ReadFile(filepath.Join(t.procRoot, strconv.Itoa(pid), "cmdline")); err == nil {
		tp.Command = redact.Args(splitNUL(b))
	}
	t.procs[pid] = tp
	t.order = append(t.order, pid)
}

func splitNUL(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(f))
	}
	return out
}

// refresh reads every process's stat once: the known ones that are gone
// (or whose pid now names a later process) are marked gone, and every
// process whose parent is a live one of the tree joins it. With sweep it
// also looks for MarkerVar in the environment of the processes it does not
// know (environ is readable for the processes of the same user, which CMD's
// are).
func (t *tree) refresh(sweep bool) {
	names, err := os.ReadDir(t.procRoot)
	if err != nil {
		return
	}
	stats := map[int]statInfo{}
	for _, e := range names {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(t.procRoot, e.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, err := parseStat(b); err == nil {
			stats[pid] = st
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Since(t.started).Milliseconds()
	for pid, tp := range t.procs {
		st, ok := stats[pid]
		// A zombie has exited: only its parent's wait is left to do.
		if tp.alive && (!ok || st.state == 'Z' || (tp.start != 0 && st.start != tp.start)) {
			tp.alive, tp.GoneMS = false, now
		}
		if tp.alive && tp.start == 0 && ok {
			tp.start = st.start // the root, known before its first stat
		}
	}
	// Children of live members, to a fixed point (a grandchild may be
	// listed before its parent joined).
	for grew := true; grew; {
		grew = false
		for pid, st := range stats {
			if _, known := t.procs[pid]; known {
				continue
			}
			if p := t.procs[st.ppid]; p != nil && p.alive && st.state != 'Z' {
				t.add(pid, st.ppid, st.start, fmt.Sprintf("child of %d", st.ppid))
				grew = true
			}
		}
	}
	if !sweep || t.marker == "" {
		return
	}
	for pid, st := range stats {
		if _, known := t.procs[pid]; known || pid == os.Getpid() {
			continue
		}
		if st.state == 'Z' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(t.procRoot, strconv.Itoa(pid), "environ"))
		if err != nil || !hasEnv(b, t.marker) {
			continue
		}
		t.add(pid, st.ppid, st.start, "by its environment")
	}
}

// hasEnv says whether an environ file (NUL-separated) holds the entry kv.
func hasEnv(environ []byte, kv string) bool {
	for _, e := range bytes.Split(environ, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// live returns the pids of the tree's live processes, in the order found.
func (t *tree) live() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int
	for _, pid := range t.order {
		if t.procs[pid].alive {
			out = append(out, pid)
		}
	}
	return out
}

// all returns every process found, in the order found.
func (t *tree) all() []Proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Proc, 0, len(t.order))
	for _, pid := range t.order {
		out = append(out, t.procs[pid].Proc)
	}
	return out
}

// has says whether pid is a live member.
func (t *tree) has(pid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.procs[pid]
	return p != nil && p.alive
}

// signal sends sig to every live member that is still the process it was
// (same start time), and to the process group of the root (pgid: it was
// started as a group leader). A member that left the group (setsid) is
// reached by its pid.
func (t *tree) signal(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
	t.refresh(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pid := range t.order {
		if p := t.procs[pid]; p.alive {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// stop ends every process of the tree: SIGTERM, then SIGKILL for what is
// left after grace, and sweeps once more for members that let go of their
// parent. It returns the pids still there after SIGKILL (none, unless one
// is stuck in the kernel), and waits until they are gone, for at most
// grace more.
func (t *tree) stop(pgid int, grace time.Duration) []int {
	t.refresh(true)
	t.signal(pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && len(t.live()) > 0 {
		time.Sleep(50 * time.Millisecond)
		t.refresh(true)
	}
	t.signal(pgid, syscall.SIGKILL)
	deadline = time.Now().Add(grace)
	for time.Now().Before(deadline) {
		t.refresh(true)
		// A zombie is gone as a process (refresh marks it so); its parent
		// (kdiag, or init) reaps it.
		if len(t.live()) == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return t.live()
}
