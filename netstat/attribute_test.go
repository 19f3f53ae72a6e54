package netstat

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/sockettest"
	"golang.org/x/sys/unix"
)

// fixtureProc builds a /proc tree whose fd entries are real symlinks:
// fds[pid][fd] is the link target ("socket:[123]", "/dev/null", ...).
func fixtureProc(t testing.TB, fds map[int]map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, links := range fds {
		dir := filepath.Join(root, strconv.Itoa(pid), "fd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for fd, target := range links {
			if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(fd))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func sock(ino uint64) string { return fmt.Sprintf("socket:[%d]", ino) }

func TestAttributeFixture(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{
		100: {0: "/dev/null", 1: "pipe:[77]", 3: sock(1001), 4: sock(1002), 7: "anon_inode:[eventpoll]"},
		200: {3: sock(2001), 9: sock(1003)},
		300: {5: "socket:[notanumber]", 6: "socket:[]"},
	})
	a := NewAttributor(root)
	got, st := a.Attribute(context.Background(), []int{100, 200, 300}, []uint64{1001, 1002, 1003, 2001, 9999, 0})
	want := map[uint64]Owner{1001: {100, 3}, 1002: {100, 4}, 1003: {200, 9}, 2001: {200, 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("owners (-want +got):\n%s", d)
	}
	if st.Wanted != 5 || st.Found != 4 || st.Cached != 0 {
		t.Errorf("stats = %+v, want 5 wanted, 4 found, 0 cached", st)
	}
	if len(st.Exited)+len(st.Denied)+len(st.Failed) != 0 {
		t.Errorf("unexpected notes: %+v", st)
	}
}

func TestAttributeSocketsLeavesUnknownUnattributed(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{42: {3: sock(5)}})
	socks := []Socket{{Inode: 5, PID: 9, FD: 9}, {Inode: 6, PID: 9, FD: 9}, {Inode: 0, State: TimeWait}}
	NewAttributor(root).AttributeSockets(context.Background(), []int{42}, socks)
	got := [][2]int{{socks[0].PID, socks[0].FD}, {socks[1].PID, socks[1].FD}, {socks[2].PID, socks[2].FD}}
	want := [][2]int{{42, 3}, {0, -1}, {0, -1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(pid, fd) (-want +got):\n%s", d)
	}
}

func TestAttributeStopsWhenAllFound(t *testing.T) {
	fds := map[int]map[int]string{1: {3: sock(11)}}
	for pid := 2; pid <= 50; pid++ {
		fds[pid] = map[int]string{3: sock(uint64(pid * 100)), 4: sock(uint64(pid*100 + 1))}
	}
	root := fixtureProc(t, fds)
	a := &Attributor{ProcRoot: root, Workers: 1}
	pids := make([]int, 0, 50)
	for pid := 1; pid <= 50; pid++ {
		pids = append(pids, pid)
	}
	got, st := a.Attribute(context.Background(), pids, []uint64{11})
	if d := cmp.Diff(map[uint64]Owner{11: {1, 3}}, got); d != "" {
		t.Errorf("owners (-want +got):\n%s", d)
	}
	// The probe of pid 1 finds it; nothing else is read.
	if st.Walked != 0 || st.Links != 1 {
		t.Errorf("walked %d dirs and %d links, want 0 and 1: the walk goes on after every inode was found", st.Walked, st.Links)
	}
}

// TestAttributeProbeOrder checks that the processes holding the wanted
// sockets are walked first: with one worker, after the probe, only the
// holder's directory is walked, not the pids before it.
func TestAttributeProbeOrder(t *testing.T) {
	fds := map[int]map[int]string{}
	var want []uint64
	for pid := 1; pid <= 5; pid++ {
		fds[pid] = map[int]string{}
		for fd := 3; fd < 3+200; fd++ {
			ino := uint64(pid*1000 + fd)
			fds[pid][fd] = sock(ino)
			if pid == 5 {
				want = append(want, ino)
			}
		}
	}
	root := fixtureProc(t, fds)
	a := &Attributor{ProcRoot: root, Workers: 1}
	got, st := a.Attribute(context.Background(), []int{1, 2, 3, 4, 5}, want)
	if len(got) != len(want) {
		t.Fatalf("found %d of %d", len(got), len(want))
	}
	if st.Walked != 1 || st.Links > 200+5*probeLinks {
		t.Errorf("walked %d dirs, %d links; want 1 dir (pid 5) and at most %d links", st.Walked, st.Links, 200+5*probeLinks)
	}
}

// TestAttributeProbeFindsHighFDs checks the probe on the real /proc of a
// process shaped like a leaking JVM: hundreds of files first (jars, logs),
// the wanted sockets on top. A probe of the first fds alone reads only the
// files; the probe's sample of the top of the table must land on the
// sockets, within probeLinks.
func TestAttributeProbeFindsHighFDs(t *testing.T) {
	openFiles(t, 400)
	socks := sockettest.CloseWait(t, "tcp4", 300)
	want := &inodeTable[int32]{}
	want.reset(len(socks))
	for i, s := range socks {
		if s.FD < 400 {
			t.Fatalf("socket %v below fd 400: the files did not come first", s)
		}
		e, _ := want.put(s.Inode)
		*e = int32(i)
	}
	r := &attrRun{want: want, set: func(int32, Owner) {}, claimed: make([]atomic.Uint32, want.len())}
	r.remaining.Store(int64(want.len()))
	res := newAttrWorker().probe(NewAttributor("/proc"), r, os.Getpid())
	if res.probeHits == 0 {
		t.Errorf("probe read %d links and found none of the %d sockets at fds %d-%d", r.links.Load(), len(socks), socks[0].FD, socks[len(socks)-1].FD)
	}
	if n := r.links.Load(); n > probeLinks {
		t.Errorf("probe read %d links, more than probeLinks (%d)", n, probeLinks)
	}
}

// openFiles opens n files (/dev/null) for the rest of the test, so that the
// sockets made next sit above them in the fd table, as a process's leaked
// sockets sit above its jars and logs.
func openFiles(t *testing.T, n int) {
	t.Helper()
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
}

// TestAttributeSplitWalk checks the walk of a large table in parts: 1,200
// CLOSE_WAIT sockets above 300 files, read by three workers in ranges of the
// fd table, are all found at their fds, and no link is read twice.
func TestAttributeSplitWalk(t *testing.T) {
	openFiles(t, 300)
	socks := sockettest.CloseWait(t, "tcp4", 1200)
	other := sockettest.StartChild(t, sockettest.Spec{CloseWait: 2})
	var inodes []uint64
	for _, s := range socks {
		inodes = append(inodes, s.Inode)
	}
	a := &Attributor{ProcRoot: "/proc", Workers: 3, NoCache: true}
	got, st := a.Attribute(context.Background(), []int{other.PID, os.Getpid()}, inodes)
	for _, s := range socks {
		if o := got[s.Inode]; o != (Owner{PID: os.Getpid(), FD: s.FD}) {
			t.Errorf("%v: got %+v", s, o)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if max := len(fds) + 2*probeLinks; st.Links > max {
		t.Errorf("read %d links for a table of %d fds (at most %d with the probes): a range was read twice", st.Links, len(fds), max)
	}
	if st.Walked != 1 {
		t.Errorf("walked %d processes, want 1 (the holder)", st.Walked)
	}
}

func TestAttributeOnlyGivenPIDs(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{1: {3: sock(11)}, 2: {3: sock(22)}})
	got, st := NewAttributor(root).Attribute(context.Background(), []int{2}, []uint64{11, 22})
	if d := cmp.Diff(map[uint64]Owner{22: {2, 3}}, got); d != "" {
		t.Errorf("owners (-want +got):\n%s", d)
	}
	if st.Walked != 1 {
		t.Errorf("walked %d dirs, want 1", st.Walked)
	}
}

func TestAttributeExitedAndDenied(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{
		10: {3: sock(1)},
		20: {3: sock(2)}, // removed just before it is opened: exits mid-scan
		30: {3: sock(3)}, // EACCES, as another user's fds are when not root
		50: {3: sock(4)}, // EACCES from a process on its way out (a zombie)
	})
	if err := os.WriteFile(filepath.Join(root, "50", "stat"), []byte("50 (java) Z 1 50 50 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "30", "stat"), []byte("30 (cron) S 1 30 30 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := NewAttributor(root)
	a.openDir = func(path string) (int, error) {
		switch path {
		case filepath.Join(root, "20", "fd"):
			if err := os.RemoveAll(filepath.Join(root, "20")); err != nil {
				t.Fatal(err)
			}
		case filepath.Join(root, "30", "fd"), filepath.Join(root, "50", "fd"):
			return -1, unix.EACCES
		}
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	// 40 never existed: listed, then gone.
	got, st := a.Attribute(context.Background(), []int{10, 20, 30, 40, 50}, []uint64{1, 2, 3, 4})
	if d := cmp.Diff(map[uint64]Owner{1: {10, 3}}, got); d != "" {
		t.Errorf("owners (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{20, 40, 50}, st.Exited); d != "" {
		t.Errorf("exited (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{30}, st.Denied); d != "" {
		t.Errorf("denied (-want +got):\n%s", d)
	}
}

func TestAttributeOtherOpenErrorIsFailed(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{10: {3: sock(1)}})
	a := NewAttributor(root)
	a.openDir = func(string) (int, error) { return -1, unix.EMFILE }
	_, st := a.Attribute(context.Background(), []int{10}, []uint64{1})
	if len(st.Failed) != 1 || st.Found != 0 {
		t.Errorf("stats = %+v, want one failed pid and nothing found", st)
	}
}

func TestAttributeCache(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{
		10: {3: sock(1), 4: sock(2)},
		20: {3: sock(3)},
	})
	a := &Attributor{ProcRoot: root, Workers: 1}
	ctx := context.Background()
	if _, st := a.Attribute(ctx, []int{10, 20}, []uint64{1, 2, 3}); st.Found != 3 || st.Cached != 0 {
		t.Fatalf("first scan: %+v", st)
	}

	// Unchanged: every inode from the cache, no directory walked; over
	// verifyEvery calls each cached holder is read again exactly once.
	links := 0
	for i := 0; i < verifyEvery; i++ {
		got, st := a.Attribute(ctx, []int{10, 20}, []uint64{1, 2, 3})
		if st.Cached != 3 || st.Walked != 0 {
			t.Fatalf("rescan %d: %+v, want 3 cached, 0 walked", i, st)
		}
		if d := cmp.Diff(map[uint64]Owner{1: {10, 3}, 2: {10, 4}, 3: {20, 3}}, got); d != "" {
			t.Fatalf("rescan %d owners (-want +got):\n%s", i, d)
		}
		links += st.Links
	}
	if links != 3 {
		t.Errorf("%d calls read %d links, want each of the 3 holders verified once", verifyEvery, links)
	}

	// The process moves inode 1 from fd 3 to fd 5 (dup2, close): found
	// there within verifyEvery calls.
	if err := os.Remove(filepath.Join(root, "10", "fd", "3")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sock(1), filepath.Join(root, "10", "fd", "5")); err != nil {
		t.Fatal(err)
	}
	moved := false
	for i := 0; i <= verifyEvery && !moved; i++ {
		got, _ := a.Attribute(ctx, []int{10, 20}, []uint64{1, 2, 3})
		moved = got[1] == (Owner{10, 5})
	}
	if !moved {
		t.Errorf("inode 1 not found at its new fd within %d calls", verifyEvery+1)
	}

	// Socket 2 is closed and fd 4 reused for socket 4; pid 20 exits (with
	// socket 3): the new socket is walked for and found.
	link := filepath.Join(root, "10", "fd", "4")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sock(4), link); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "20")); err != nil {
		t.Fatal(err)
	}
	got, st := a.Attribute(ctx, []int{10}, []uint64{1, 4})
	if d := cmp.Diff(map[uint64]Owner{1: {10, 5}, 4: {10, 4}}, got); d != "" {
		t.Errorf("after changes, owners (-want +got):\n%s (%+v)", d, st)
	}
	a.Prune(func(pid int) bool { return pid == 10 })
	for ino, e := range a.cache {
		if e.pid != 10 {
			t.Errorf("cache keeps inode %d of exited pid %d", ino, e.pid)
		}
	}
	a.Prune(func(pid int) bool { return pid != 10 })
	if a.CacheLen() != 0 {
		t.Errorf("after Prune of pid 10 the cache holds %d entries", a.CacheLen())
	}
}

// TestAttributeRealProcess attributes the test process's own sockets through
// the real /proc.
func TestAttributeRealProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File() // a dup: a second fd, same inode
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	got, stats := NewAttributor("/proc").Attribute(context.Background(), []int{os.Getpid()}, []uint64{st.Ino})
	o, ok := got[st.Ino]
	if !ok || o.PID != os.Getpid() {
		t.Fatalf("inode %d: got %+v (stats %+v), want pid %d", st.Ino, got, stats, os.Getpid())
	}
	// Either descriptor may come first; it must hold the inode.
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", o.FD))
	if err != nil || link != sock(st.Ino) {
		t.Errorf("fd %d links to %q (%v), want %q", o.FD, link, err, sock(st.Ino))
	}
}

func TestParseSocketLink(t *testing.T) {
	for in, want := range map[string]uint64{
		"socket:[12345]": 12345, "socket:[0]": 0, "socket:[]": 0, "socket:[12a]": 0,
		"pipe:[12]": 0, "/dev/null": 0, "socket:[12": 0, "": 0,
	} {
		if got := parseSocketLink([]byte(in)); got != want {
			t.Errorf("parseSocketLink(%q) = %d, want %d", in, got, want)
		}
	}
}

func FuzzParseSocketLink(f *testing.F) {
	f.Add([]byte("socket:[12345]"))
	f.Add([]byte("pipe:[1]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ino := parseSocketLink(b)
		if ino != 0 && string(b) != sock(ino) && len(b) < 30 {
			// Leading zeros are the only other spelling of the same number.
			if b[8] != '0' {
				t.Errorf("parseSocketLink(%q) = %d", b, ino)
			}
		}
	})
}

// BenchmarkAttribute walks a fixture of 8 processes with 1,000 socket fds
// each, looking for every socket, with and without the cache of the previous
// run.
func BenchmarkAttribute(b *testing.B) {
	fds := map[int]map[int]string{}
	var inodes []uint64
	for pid := 1; pid <= 8; pid++ {
		fds[pid] = map[int]string{0: "/dev/null"}
		for fd := 3; fd < 1003; fd++ {
			ino := uint64(pid*100000 + fd)
			fds[pid][fd] = sock(ino)
			inodes = append(inodes, ino)
		}
	}
	root := fixtureProc(b, fds)
	pids := []int{1, 2, 3, 4, 5, 6, 7, 8}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := NewAttributor(root)
			if _, st := a.Attribute(context.Background(), pids, inodes); st.Found != len(inodes) {
				b.Fatalf("found %d of %d", st.Found, len(inodes))
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		a := NewAttributor(root)
		a.Attribute(context.Background(), pids, inodes)
		for b.Loop() {
			if _, st := a.Attribute(context.Background(), pids, inodes); st.Cached != len(inodes) {
				b.Fatalf("cached %d of %d", st.Cached, len(inodes))
			}
		}
	})
	b.Run("one-wanted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := NewAttributor(root)
			if _, st := a.Attribute(context.Background(), pids, inodes[len(inodes)-1:]); st.Found != 1 {
				b.Fatalf("found %d of 1", st.Found)
			}
		}
	})
}

// TestAttributeUnowned checks that an inode no process holds (another
// user's socket, when not root) does not make every rescan walk again, and
// that it is looked for again after unownedTTL calls.
func TestAttributeUnowned(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{10: {3: sock(1)}, 20: {3: sock(2)}})
	a := &Attributor{ProcRoot: root, Workers: 1}
	ctx := context.Background()
	if _, st := a.Attribute(ctx, []int{10, 20}, []uint64{1, 999}); st.Walked != 2 || st.Found != 1 {
		t.Fatalf("first call: %+v, want 2 walked, 1 found", st)
	}
	for i := 0; i < unownedTTL; i++ {
		if _, st := a.Attribute(ctx, []int{10, 20}, []uint64{1, 999}); st.Walked != 0 || st.Found != 1 {
			t.Fatalf("call %d: %+v, want no walk, 1 found from the cache", i+2, st)
		}
	}
	if _, st := a.Attribute(ctx, []int{10, 20}, []uint64{1, 999}); st.Walked != 2 {
		t.Errorf("after %d calls: %+v, want a walk again", unownedTTL, st)
	}
	// A new socket walks at once.
	if err := os.Symlink(sock(3), filepath.Join(root, "20", "fd", "4")); err != nil {
		t.Fatal(err)
	}
	got, st := a.Attribute(ctx, []int{10, 20}, []uint64{1, 3, 999})
	if st.Walked == 0 || got[3] != (Owner{20, 4}) {
		t.Errorf("new socket: %+v, owners %v, want a walk that finds inode 3 at pid 20 fd 4", st, got)
	}
}

// BenchmarkAttributeProc attributes 2,000 real CLOSE_WAIT sockets of this
// process through /proc, cold (a new Attributor each time) and from the
// cache of the previous run.
func BenchmarkAttributeProc(b *testing.B) {
	socks := sockettest.CloseWait(b, "tcp4", 2000)
	inodes := make([]uint64, len(socks))
	for i, s := range socks {
		inodes[i] = s.Inode
	}
	pids := []int{os.Getpid()}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, st := NewAttributor("/proc").Attribute(context.Background(), pids, inodes); st.Found != len(inodes) {
				b.Fatalf("found %d of %d", st.Found, len(inodes))
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		a := NewAttributor("/proc")
		a.Attribute(context.Background(), pids, inodes)
		for b.Loop() {
			if _, st := a.Attribute(context.Background(), pids, inodes); st.Cached != len(inodes) {
				b.Fatalf("cached %d of %d", st.Cached, len(inodes))
			}
		}
	})
}

// TestAttributeRetriesOutOfFDs: a walk that fails because kdiag ran out of
// file descriptors (EMFILE, as with a low ulimit -n and several workers) is
// tried again, alone, and finds the socket.
func TestAttributeRetriesOutOfFDs(t *testing.T) {
	root := fixtureProc(t, map[int]map[int]string{10: {3: sock(1)}, 20: {4: sock(2)}})
	a := NewAttributor(root)
	failed := map[string]bool{}
	a.openDir = func(path string) (int, error) {
		if !failed[path] {
			failed[path] = true
			return -1, unix.EMFILE
		}
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	a.Workers = 1 // openDir is not safe for concurrent use
	got, st := a.Attribute(context.Background(), []int{10, 20}, []uint64{1, 2})
	if d := cmp.Diff(map[uint64]Owner{1: {10, 3}, 2: {20, 4}}, got); d != "" {
		t.Errorf("owners (-want +got):\n%s", d)
	}
	if len(st.Failed) != 0 {
		t.Errorf("failed %v, want none once retried", st.Failed)
	}
}
