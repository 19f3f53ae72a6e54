package netstat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attributor maps socket inodes to the process and descriptor holding them,
// by reading the links of /proc/<pid>/fd (each socket fd links to
// "socket:[<inode>]", see proc(5) and fs/proc/fd.c).
//
// This is where ss -p and gopsutil spend their time: they read every link of
// every process. The Attributor reads only the pids it is given, only until
// every wanted inode is found, on GOMAXPROCS workers, with one getdents64 and
// one readlinkat per fd into reused buffers (no allocation per link), and it
// keeps what it saw so that the next call verifies the cached (pid, fd) of a
// wanted inode with one readlinkat instead of walking.
//
// An Attributor is not safe for concurrent use; its cache makes repeated
// calls cheap.
type Attributor struct {
	// ProcRoot is the root of the proc filesystem, "/proc" on a host; a test
	// points it at a fixture tree whose fd entries are real symlinks.
	ProcRoot string
	// Workers bounds the goroutines walking fd directories; 0 means
	// GOMAXPROCS.
	Workers int
	// NoCache keeps nothing for the next call: for a one-shot scan, where
	// a cache of every socket fd walked would only cost memory.
	NoCache bool
	// CollectOthers makes each call walk every fd of every pid it reads
	// and keep, in Others, the socket fds whose inode it was not asked
	// for: what finding held CLOSE sockets needs, without a second walk.
	CollectOthers bool
	// Others holds, since ResetOthers, the socket fds the calls read whose
	// inodes were not wanted, and Complete the pids whose every fd was read.
	Others   []heldFD
	Complete map[int]bool

	// cache maps the inode of every socket fd seen by earlier walks to the
	// (pid, fd) that held it. It is the pid -> {fd -> inode} table stored the
	// other way round, because lookups go from a wanted inode to its holder.
	cache map[uint64]attrCacheEntry
	gen   uint32
	// unowned holds the wanted inodes a complete walk did not find, with
	// the generation of that walk: sockets held by processes kdiag may not
	// read (another user's, when not root) or by none. Without it every
	// rescan of a non-root `kdiag watch` would walk every process again
	// for sockets it can never find. An entry is trusted for unownedTTL
	// calls, after which a walk looks again (a socket can change hands
	// through fork or SCM_RIGHTS).
	unowned map[uint64]uint32

	// openDir opens a directory for getdents64. Tests replace it to inject
	// errors a fixture tree cannot produce when run as root (EACCES).
	openDir func(path string) (int, error)

	// want and claimed are AttributeSockets' per-call tables, kept
	// between calls: a 1 Hz watch of 60,000 sockets would otherwise
	// allocate (and collect) about 3 MB of them every second.
	want    inodeTable[int32]
	claimed []atomic.Uint32

	// idle holds the workers of finished pools for the next (see worker);
	// idleMu guards it, as a pool's goroutines return theirs as they end.
	idleMu sync.Mutex
	idle   []*attrWorker

	// fds, when set (the Scanner's socket fd iterator), replaces the
	// probe and the walks of /proc/<pid>/fd by one pass over every
	// socket fd (see pass); table, when set, is such a pass made
	// already, while a one-shot scan dumped (see prefetch).
	fds   fdPass
	table *fdTable
	// heldPasses counts heldPass's passes since ResetOthers.
	heldPasses int
}

// unownedTTL is how many calls a "not found" answer is trusted.
const unownedTTL = 10

type attrCacheEntry struct {
	pid, fd int32
	// seen is the generation (call number) in which the entry was last read
	// or verified, so entries of a fully walked pid not seen again (the fd was
	// closed) can be dropped.
	seen uint32
	// verified is the generation whose readlink last confirmed the entry,
	// staggered by inode when recorded so that re-verifications spread over
	// calls instead of coming all at once.
	verified uint32
}

// verifyEvery is how many calls a cached holder is trusted without a
// readlink. While the inode is still wanted its socket still exists, and a
// live socket leaves the fd that holds it only if the process moves it
// (dup2 and close) or hands it on and closes it, which is rare; a holder
// moved so is found again within verifyEvery calls. This is what makes a
// once-a-second `kdiag watch` of 20,000 CLOSE_WAIT sockets cheap: each call
// reads a tenth of them instead of all.
const verifyEvery = 10

// newCacheEntry records a holder read at generation gen.
func newCacheEntry(ino uint64, pid int, fd int32, gen uint32) attrCacheEntry {
	return attrCacheEntry{pid: int32(pid), fd: fd, seen: gen, verified: gen - uint32(ino%verifyEvery)}
}

// Owner is the process and descriptor that hold a socket.
type Owner struct {
	PID int
	FD  int
}

// AttributeStats says what one attribution call met.
type AttributeStats struct {
	// Wanted is the number of distinct inodes asked for, Found how many of
	// them were attributed, Cached how many of those were verified from the
	// cache without a walk.
	Wanted, Found, Cached int
	// Walked counts the fd directories read, Links the readlinkat calls
	// (or, for a pass, the socket fds it listed).
	Walked, Links int
	// Passes counts the passes over every socket fd (the iterator's)
	// that replaced walks.
	Passes int
	// Exited lists pids that were gone when their fds were read (a process
	// that exits mid-scan is normal).
	Exited []int
	// Denied lists pids whose fds could not be read (EACCES or EPERM: another
	// user's process when not root).
	Denied []int
	// Failed lists pids whose fds could not be read for another reason, with
	// the error (EMFILE: kdiag ran out of file descriptors).
	Failed []PIDError
}

// PIDError is an error reading the fds of one process.
type PIDError struct {
	PID int
	Err error
}

func (e PIDError) String() string { return fmt.Sprintf("pid %d: %v", e.PID, e.Err) }

// outOfFDs reports whether err says kdiag itself ran out of file
// descriptors (its own RLIMIT_NOFILE, or the system's table): nothing about
// the process it was reading.
func outOfFDs(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// NewAttributor returns an Attributor reading procRoot.
func NewAttributor(procRoot string) *Attributor {
	return &Attributor{ProcRoot: procRoot}
}

// AttributeSockets sets PID and FD of the sockets in socks whose inode is held
// by one of pids, and leaves the others unattributed (PID 0, FD -1). Sockets
// with inode 0 (TIME_WAIT, orphans) are held by no file and are skipped.
//
// It walks only pids, stops as soon as every wanted inode is found, and
// returns what it met; a process that exits or refuses access is a note in
// the stats, never an error. A socket shared by several processes (fds
// inherited across fork) is attributed to one of them.
func (a *Attributor) AttributeSockets(ctx context.Context, pids []int, socks []Socket) AttributeStats {
	keys := 0
	for i := range socks {
		if socks[i].Inode != 0 {
			keys++
		}
	}
	want := &a.want
	want.reset(keys)
	for i := range socks {
		socks[i].PID, socks[i].FD = 0, -1
		if socks[i].Inode != 0 {
			e, _ := want.put(socks[i].Inode)
			*e = int32(i) // a repeat's later index, as a map assignment would
		}
	}
	// The holders go straight into socks (each index is claimed once, so
	// no two workers write the same socket): no table of owners beside
	// them, 16 bytes a socket.
	return a.attribute(ctx, pids, want, len(socks), func(i int32, o Owner) {
		socks[i].PID, socks[i].FD = o.PID, o.FD
	}, uidOrder(socks))
}

// Attribute returns the holder of each wanted inode that one of pids holds.
func (a *Attributor) Attribute(ctx context.Context, pids []int, inodes []uint64) (map[uint64]Owner, AttributeStats) {
	want := &inodeTable[int32]{}
	want.reset(len(inodes))
	n := int32(0)
	for _, ino := range inodes {
		if ino == 0 {
			continue
		}
		if e, added := want.put(ino); added {
			*e = n
			n++
		}
	}
	owners := make([]Owner, n)
	st := a.attribute(ctx, pids, want, len(owners), func(i int32, o Owner) { owners[i] = o }, nil)
	out := make(map[uint64]Owner, st.Found)
	for ino, i := range want.all() {
		if o := owners[*i]; o.PID != 0 {
			out[ino] = o
		}
	}
	return out, st
}

// Prune drops cached entries of processes for which alive returns false, so
// the cache of a long `kdiag watch` does not keep exited pids.
func (a *Attributor) Prune(alive func(pid int) bool) {
	for ino, e := range a.cache {
		if !alive(int(e.pid)) {
			delete(a.cache, ino)
		}
	}
}

// CacheLen returns the number of socket fds in the cache.
func (a *Attributor) CacheLen() int { return len(a.cache) }

// uidOrder returns the socket owners' uids, so the walk reads first the
// processes running as those users: a socket's uid (sock_i_uid) is the fsuid
// of its creator, so its holder usually runs as that uid. Only the order
// depends on it; a mismatch costs time, never a wrong answer.
func uidOrder(socks []Socket) map[uint32]bool {
	uids := map[uint32]bool{}
	for i := range socks {
		if socks[i].Inode != 0 {
			uids[socks[i].UID] = true
		}
	}
	return uids
}

// attrRun is the shared state of one attribution call.
type attrRun struct {
	// want maps each wanted inode to its index below n.
	want *inodeTable[int32]
	// set records the holder of the wanted inode with index i, once.
	set       func(i int32, o Owner)
	claimed   []atomic.Uint32
	remaining atomic.Int64
	links     atomic.Int64
	// collect walks every fd of every pid, not only until every wanted
	// inode is found, and keeps the socket fds whose inode is not wanted
	// (Attributor.CollectOthers).
	collect bool
}

// done reports whether the walks can stop: every wanted inode is found and
// nothing else is being collected.
func (r *attrRun) done() bool { return r.remaining.Load() == 0 && !r.collect }

// claim records o as the holder of ino if ino is wanted and not yet claimed.
func (r *attrRun) claim(ino uint64, o Owner) bool {
	i, ok := r.want.get(ino)
	if !ok || !r.claimed[*i].CompareAndSwap(0, 1) {
		return false
	}
	r.set(*i, o)
	r.remaining.Add(-1)
	return true
}

// attrResult is what one worker reports about one pid.
type attrResult struct {
	pid      int
	exited   bool
	denied   bool
	failed   error
	complete bool // every fd of the pid was read
	walked   bool
	seen     []attrSeen
	// others are the socket fds a collecting walk read whose inode is not
	// wanted.
	others []attrSeen
	// probeHits counts the wanted sockets among the fds a probe read.
	probeHits int
	// top is the last fd a probe found, -1 when it did not look.
	top int
	// parts is how many walks the pid's fds were split into (0 or 1: one).
	parts int
	// holdsMatch: heldTCP's walk found a socket of its match in the pid.
	holdsMatch bool
}

type attrSeen struct {
	ino     uint64
	fd      int32
	cached  bool // a verified cache entry, not a walk
	matched bool
	proto   uint8 // heldTCP: the socket's Family
}

// attribute finds the holders of want's inodes among pids; want maps an
// inode to its index below n, and set receives each holder found.
func (a *Attributor) attribute(ctx context.Context, pids []int, want *inodeTable[int32], n int, set func(int32, Owner), uids map[uint32]bool) AttributeStats {
	a.gen++
	if a.cache == nil {
		a.cache = map[uint64]attrCacheEntry{}
	}
	if cap(a.claimed) < n {
		a.claimed = make([]atomic.Uint32, n)
	}
	claimed := a.claimed[:n]
	for i := range claimed {
		claimed[i].Store(0)
	}
	r := &attrRun{want: want, set: set, claimed: claimed, collect: a.CollectOthers}
	r.remaining.Store(int64(want.len()))
	st := AttributeStats{Wanted: want.len()}
	if want.len() == 0 {
		return st
	}
	inSet := make(map[int]bool, len(pids))
	for _, p := range pids {
		inSet[p] = true
	}

	// Phase 1: take cached holders of wanted inodes, trusted if recently
	// verified (verifyEvery), else verified with a readlink, grouped by pid.
	verify := map[int][]attrSeen{}
	hits := map[int]int{}
	for ino := range want.all() {
		e, ok := a.cache[ino]
		if !ok || !inSet[int(e.pid)] {
			continue
		}
		if a.gen-e.verified < verifyEvery && r.claim(ino, Owner{PID: int(e.pid), FD: int(e.fd)}) {
			st.Cached++
			hits[int(e.pid)]++
			continue
		}
		verify[int(e.pid)] = append(verify[int(e.pid)], attrSeen{ino: ino, fd: e.fd})
	}
	var results []attrResult
	if len(verify) > 0 {
		vp := make([]int, 0, len(verify))
		for p := range verify {
			vp = append(vp, p)
		}
		slices.Sort(vp)
		results = append(results, a.pool(ctx, vp, func(w *attrWorker, pid int) attrResult {
			return w.verify(a, r, pid, verify[pid])
		})...)
		for _, res := range results {
			for _, s := range res.seen {
				if s.matched {
					st.Cached++
					hits[res.pid]++
				}
			}
		}
	}

	// Phase 2: walk what is still missing, unless all of it was missing
	// from a recent complete walk too. Pids that held wanted sockets
	// before, then pids of the sockets' users, go first: they are the likely
	// holders, and the walk stops when nothing is missing.
	walked := false
	passed := false
	if (r.remaining.Load() > 0 && a.mustWalk(r)) || r.collect {
		walked = true
		if a.fds != nil || a.table != nil {
			var res []attrResult
			res, passed = a.pass(r, pids)
			results = append(results, res...)
			if passed {
				st.Passes++
			}
		}
	}
	if walked && !passed {
		// Probe: the first few fds of every pid say which processes hold
		// the wanted sockets (a process holding CLOSE_WAIT sockets usually
		// holds many), so they are walked first and the walk can stop
		// before reading the others.
		skip := map[int]bool{}
		tops := map[int]int{}
		if len(pids) > 1 {
			for _, res := range a.pool(ctx, pids, func(w *attrWorker, pid int) attrResult {
				if r.done() || ctx.Err() != nil {
					return attrResult{pid: pid}
				}
				return w.probe(a, r, pid)
			}) {
				hits[res.pid] += res.probeHits
				tops[res.pid] = res.top
				if res.exited || res.denied || res.failed != nil {
					skip[res.pid] = true
				}
				results = append(results, res)
			}
		}
		// The likely holders are walked on their own first: walked
		// alongside the others, they would share the workers with processes
		// that are read in full only to find nothing.
		order := a.walkOrder(pids, hits, uids)
		likely := 0
		for likely < len(order) && hits[order[likely]] > 0 {
			likely++
		}
		for _, stage := range [][]int{order[:likely], order[likely:]} {
			if len(stage) == 0 || r.done() {
				continue
			}
			// A likely holder with a large table is walked in parts, one
			// range of fds each, so that one process holding thousands of
			// sockets is read on every core rather than on one.
			var jobs []walkJob
			for _, pid := range stage {
				top, parts := tops[pid], 1
				if hits[pid] > 0 && top >= 2*walkSplitSpan {
					parts = min(a.workers(), top/walkSplitSpan)
				}
				for k := range parts {
					j := walkJob{pid: pid, lo: top * k / parts, hi: top * (k + 1) / parts, parts: parts}
					if k == parts-1 {
						j.hi = 0 // to the end, fds opened since the probe included
					}
					jobs = append(jobs, j)
				}
			}
			idx := make([]int, len(jobs))
			for i := range idx {
				idx[i] = i
			}
			results = append(results, a.pool(ctx, idx, func(w *attrWorker, i int) attrResult {
				j := jobs[i]
				if r.done() || ctx.Err() != nil || skip[j.pid] {
					return attrResult{pid: j.pid}
				}
				return w.walk(a, r, j)
			})...)
		}
	}

	results = a.retryOutOfFDs(ctx, r, results)

	// Merge into the cache and the stats.
	exited := map[int]bool{}
	complete := map[int]bool{}
	partsDone := map[int]int{}
	walkedPID := map[int]bool{}
	for _, res := range results {
		switch {
		case res.exited:
			if !exited[res.pid] {
				exited[res.pid] = true
				st.Exited = append(st.Exited, res.pid)
			}
		case res.denied && a.gone(res.pid):
			// A process on its way out refuses its fds (EACCES) before its
			// /proc entry goes: it exited, it did not deny kdiag.
			if !exited[res.pid] {
				exited[res.pid] = true
				st.Exited = append(st.Exited, res.pid)
			}
		case res.denied:
			st.Denied = append(st.Denied, res.pid)
		case res.failed != nil:
			st.Failed = append(st.Failed, PIDError{res.pid, res.failed})
		}
		if res.walked && !walkedPID[res.pid] {
			walkedPID[res.pid] = true
			st.Walked++
		}
		if res.complete {
			// A pid walked in parts is complete when every part is.
			partsDone[res.pid]++
			complete[res.pid] = partsDone[res.pid] >= max(res.parts, 1)
		}
		for _, s := range res.seen {
			if s.cached && !s.matched {
				// The fd no longer holds that inode (closed or reused).
				if e, ok := a.cache[s.ino]; ok && int(e.pid) == res.pid && e.fd == s.fd {
					delete(a.cache, s.ino)
				}
				continue
			}
			if s.cached {
				// Verified now: trusted for the next verifyEvery calls.
				a.cache[s.ino] = attrCacheEntry{pid: int32(res.pid), fd: s.fd, seen: a.gen, verified: a.gen}
				continue
			}
			a.cache[s.ino] = newCacheEntry(s.ino, res.pid, s.fd, a.gen)
		}
	}
	for ino, e := range a.cache {
		if exited[int(e.pid)] || (complete[int(e.pid)] && e.seen != a.gen) {
			delete(a.cache, ino)
		}
	}
	if r.collect {
		if a.Complete == nil {
			a.Complete = map[int]bool{}
		}
		for _, res := range results {
			for _, o := range res.others {
				a.Others = append(a.Others, heldFD{pid: res.pid, fd: int(o.fd), ino: o.ino, family: Family(o.proto)})
			}
		}
		for pid, ok := range complete {
			if ok && !exited[pid] {
				a.Complete[pid] = true
			}
		}
	}
	a.noteUnowned(r, walked && ctx.Err() == nil)
	slices.Sort(st.Exited)
	slices.Sort(st.Denied)
	st.Denied = slices.Compact(st.Denied)
	st.Found = want.len() - int(r.remaining.Load())
	st.Links = int(r.links.Load())
	return st
}

// ResetOthers forgets what earlier calls collected (CollectOthers).
func (a *Attributor) ResetOthers() {
	a.Others = a.Others[:0]
	a.heldPasses = 0
	clear(a.Complete)
}

// retryOutOfFDs walks again, one at a time, the pids whose fds could not be
// read because kdiag ran out of file descriptors (a low ulimit -n: every
// worker holds a directory open), while wanted inodes are missing. Their
// failed results are replaced by the retries', appended last so that a pid
// walked in parts is complete once its retry is.
func (a *Attributor) retryOutOfFDs(ctx context.Context, r *attrRun, results []attrResult) []attrResult {
	var pids []int
	seen := map[int]bool{}
	for _, res := range results {
		if res.failed != nil && outOfFDs(res.failed) && !seen[res.pid] {
			seen[res.pid] = true
			pids = append(pids, res.pid)
		}
	}
	if len(pids) == 0 || r.done() {
		return results
	}
	kept := results[:0]
	for _, res := range results {
		if res.failed == nil || !outOfFDs(res.failed) {
			kept = append(kept, res)
		}
	}
	w := a.worker()
	defer a.putWorker(w)
	for _, pid := range pids {
		if r.done() || ctx.Err() != nil {
			// Nothing is missing: the failure no longer matters.
			continue
		}
		kept = append(kept, w.walk(a, r, walkJob{pid: pid}))
	}
	return kept
}

// gone reports whether pid has exited or is a zombie: such a process has
// no fds left to read.
func (a *Attributor) gone(pid int) bool { return processGone(a.ProcRoot, pid) }

// mustWalk reports whether some missing inode was not found missing by a
// recent complete walk.
func (a *Attributor) mustWalk(r *attrRun) bool {
	for ino, i := range r.want.all() {
		if r.claimed[*i].Load() != 0 {
			continue
		}
		if g, ok := a.unowned[ino]; !ok || a.gen-g > unownedTTL {
			return true
		}
	}
	return false
}

// noteUnowned records the inodes a complete walk (every pid read, none
// found them) left missing, and forgets old or no longer wanted entries.
func (a *Attributor) noteUnowned(r *attrRun, complete bool) {
	if a.unowned == nil {
		a.unowned = map[uint64]uint32{}
	}
	for ino, g := range a.unowned {
		if !r.want.has(ino) || a.gen-g > unownedTTL {
			delete(a.unowned, ino)
		}
	}
	if !complete {
		return
	}
	for ino, i := range r.want.all() {
		if r.claimed[*i].Load() == 0 {
			a.unowned[ino] = a.gen
		}
	}
}

// walkOrder sorts pids: those with cache hits first (most hits first), then
// those running as a wanted uid, then the rest, each by pid.
func (a *Attributor) walkOrder(pids []int, hits map[int]int, uids map[uint32]bool) []int {
	rank := make(map[int]int, len(pids))
	for _, p := range pids {
		switch {
		case hits[p] > 0:
			rank[p] = 0
		case len(uids) > 0 && uids[a.pidUID(p)]:
			rank[p] = 1
		default:
			rank[p] = 2
		}
	}
	out := slices.Clone(pids)
	slices.SortStableFunc(out, func(x, y int) int {
		if rank[x] != rank[y] {
			return rank[x] - rank[y]
		}
		if hits[x] != hits[y] {
			return hits[y] - hits[x]
		}
		return x - y
	})
	return slices.Compact(out)
}

// pidUID returns the owner of /proc/<pid> (the process's effective uid), or
// an impossible uid when it cannot be read.
func (a *Attributor) pidUID(pid int) uint32 {
	var st unix.Stat_t
	if err := unix.Stat(a.ProcRoot+"/"+strconv.Itoa(pid), &st); err != nil {
		return ^uint32(0)
	}
	return st.Uid
}

// pool runs fn for each pid on a bounded set of workers, each with its own
// buffers, and returns the results in no particular order.
func (a *Attributor) pool(ctx context.Context, pids []int, fn func(*attrWorker, int) attrResult) []attrResult {
	n := min(a.workers(), len(pids))
	jobs := make(chan int)
	out := make(chan attrResult)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		w := a.worker()
		go func() {
			defer wg.Done()
			defer a.putWorker(w)
			for pid := range jobs {
				out <- fn(w, pid)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, p := range pids {
			select {
			case jobs <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(out) }()
	var res []attrResult
	for x := range out {
		res = append(res, x)
	}
	return res
}

// workers is the number of goroutines a pool runs: Workers, or GOMAXPROCS.
func (a *Attributor) workers() int {
	if a.Workers > 0 {
		return a.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// attrWorker holds one goroutine's reused buffers.
type attrWorker struct {
	dents []byte // getdents64 buffer
	link  []byte // readlinkat buffer
	name  []byte // NUL-terminated fd name for verification
	names []dentName
}

func newAttrWorker() *attrWorker {
	return &attrWorker{dents: make([]byte, 32<<10), link: make([]byte, 256), name: make([]byte, 0, 16)}
}

// worker takes a worker from the Attributor's idle ones, or makes one: the
// verify, probe and walk stages of every call (every second, in a watch)
// reuse the same few buffers instead of allocating 33 KB per worker each.
func (a *Attributor) worker() *attrWorker {
	a.idleMu.Lock()
	defer a.idleMu.Unlock()
	if n := len(a.idle); n > 0 {
		w := a.idle[n-1]
		a.idle = a.idle[:n-1]
		return w
	}
	return newAttrWorker()
}

// putWorker returns w to the idle workers.
func (a *Attributor) putWorker(w *attrWorker) {
	a.idleMu.Lock()
	defer a.idleMu.Unlock()
	a.idle = append(a.idle, w)
}

func (a *Attributor) open(path string) (int, error) {
	if a.openDir != nil {
		return a.openDir(path)
	}
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// classify sorts an error reading a process's fds into the result.
func classify(res *attrResult, err error) {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ESRCH):
		res.exited = true
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		res.denied = true
	default:
		res.failed = err
	}
}

// walkJob is one walk: the fds of pid from lo up to hi (0: to the end),
// one of parts walks of that pid.
type walkJob struct {
	pid, lo, hi, parts int
}

// walkSplitSpan is the fewest fds a part of a split walk reads.
const walkSplitSpan = 256

// walk reads the fd links of j's range until nothing is missing.
func (w *attrWorker) walk(a *Attributor, r *attrRun, j walkJob) attrResult {
	pid := j.pid
	res := attrResult{pid: pid, walked: true, parts: j.parts}
	dfd, err := a.open(a.ProcRoot + "/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		classify(&res, err)
		return res
	}
	defer unix.Close(dfd)
	if j.lo > 0 {
		// Positioned by fd number (see probe, which found top only where
		// that holds).
		if _, err := unix.Seek(dfd, int64(j.lo)+2, io.SeekStart); err != nil {
			res.failed = err
			return res
		}
	}
	for {
		n, err := getdents(dfd, w.dents)
		if err != nil {
			classify(&res, err)
			return res
		}
		if n == 0 {
			res.complete = true
			return res
		}
		for off := 0; off < n; {
			var nameOff int
			nameOff, off = dirent(w.dents, off)
			if w.dents[nameOff] == '.' {
				continue
			}
			fd, ok := parseFDName(w.dents[nameOff:off])
			if !ok {
				continue
			}
			if j.hi > 0 && fd >= j.hi {
				res.complete = true // the range is read
				return res
			}
			ino, err := w.readSocketLink(dfd, &w.dents[nameOff])
			r.links.Add(1)
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // the fd was closed between getdents and readlink
				}
				if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
					classify(&res, err)
					return res
				}
				continue // an fd whose target cannot be named is not a socket we can count
			}
			if ino == 0 {
				continue
			}
			if !a.NoCache {
				res.seen = append(res.seen, attrSeen{ino: ino, fd: int32(fd)})
			}
			if !r.claim(ino, Owner{PID: pid, FD: fd}) && r.collect {
				if !r.want.has(ino) {
					res.others = append(res.others, attrSeen{ino: ino, fd: int32(fd)})
				}
			}
		}
		if r.done() {
			return res
		}
	}
}

// probeLinks bounds the links a probe reads per process: enough to tell a
// process holding many wanted sockets, few enough that probing a host's
// hundreds of small processes stays cheap.
const probeLinks = 10

// probe samples the fd table of pid: its first four fds, its last fd, and
// fds at a quarter, half and three quarters of the way up; it claims the
// wanted sockets it finds and counts them.
//
// The first fds of a process are its stdio, logs, jars and libraries; the
// sockets it leaks pile up at the top of its table, which is what grows, so
// a probe of the first fds alone finds nothing in exactly the process that
// matters. /proc/<pid>/fd can be positioned with lseek: the position is the
// fd number plus two, for "." and ".." (proc_readfd_common in fs/proc/fd.c),
// and a getdents64 from a position past the last fd returns nothing. So the
// last fd is found with a few getdents64 of one or two entries each (an
// exponential then a binary search), and each sample point costs one more
// and a readlinkat.
func (w *attrWorker) probe(a *Attributor, r *attrRun, pid int) attrResult {
	res := attrResult{pid: pid, top: -1}
	dfd, err := a.open(a.ProcRoot + "/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		classify(&res, err)
		return res
	}
	defer unix.Close(dfd)
	links := 0
	read := func(fd int, name *byte) {
		ino, err := w.readSocketLink(dfd, name)
		r.links.Add(1)
		links++
		if err != nil || ino == 0 {
			return
		}
		if !a.NoCache {
			res.seen = append(res.seen, attrSeen{ino: ino, fd: int32(fd)})
		}
		if r.want.has(ino) {
			res.probeHits++
			r.claim(ino, Owner{PID: pid, FD: fd})
		}
	}

	// The first fds, read in one getdents64.
	n, err := getdents(dfd, w.dents[:512])
	if err != nil {
		classify(&res, err)
		return res
	}
	top := -1 // the highest fd seen
	names := w.names[:0]
	defer func() { w.names = names[:0] }()
	for off := 0; off < n; {
		var nameOff int
		nameOff, off = dirent(w.dents, off)
		if fd, ok := parseFDName(w.dents[nameOff:off]); ok {
			names = append(names, dentName{fd, nameOff})
			top = max(top, fd)
		}
	}
	for i, d := range names {
		if i < 4 || (i >= len(names)-2 && top < probeTopFrom) {
			read(d.fd, &w.dents[d.nameOff])
		}
	}
	if top < probeTopFrom-1 {
		// Every fd is below 16, so the 512 bytes held them all (24 bytes
		// an entry): a small table, read at both ends above.
		return res
	}

	// Find the last fd: the first power of four past it, then bisect.
	lo, hi := top, 0
	for at := probeTopFrom; ; at *= 4 {
		fd, _, ok := w.fdAt(dfd, at)
		if !ok {
			hi = at
			break
		}
		if fd < at {
			return res // not positioned by fd number: not procfs (a test's fixture tree)
		}
		lo = fd
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fd, _, ok := w.fdAt(dfd, mid); ok && fd >= mid {
			lo = fd
		} else {
			hi = mid
		}
	}
	res.top = lo
	// The top two fds, then three points below.
	prev := -1
	for _, at := range []int{lo, lo - 1, lo * 3 / 4, lo / 2, lo / 4} {
		if at <= 4 || links >= probeLinks {
			continue
		}
		if fd, nameOff, ok := w.fdAt(dfd, at); ok && fd >= at && fd != prev {
			prev = fd
			read(fd, &w.dents[nameOff])
		}
	}
	return res
}

// probeTopFrom is the first fd the search for a table's last fd tries.
const probeTopFrom = 16

// dentName is an fd and the offset of its NUL-terminated name in the
// worker's getdents64 buffer.
type dentName struct{ fd, nameOff int }

// fdAt returns the first open fd at or above at in the directory dfd
// (/proc/<pid>/fd), and the offset of its name in w.dents, by positioning
// the directory and reading one or two entries; false when there is none,
// or on an error.
func (w *attrWorker) fdAt(dfd, at int) (fd, nameOff int, ok bool) {
	if _, err := unix.Seek(dfd, int64(at)+2, io.SeekStart); err != nil {
		return 0, 0, false
	}
	n, err := getdents(dfd, w.dents[:64])
	if err != nil || n == 0 {
		return 0, 0, false
	}
	nameOff, end := dirent(w.dents, 0)
	fd, ok = parseFDName(w.dents[nameOff:end])
	return fd, nameOff, ok
}

// dirent returns the offset of the NUL-terminated name of the struct
// linux_dirent64 at off in b (include/linux/dirent.h: d_ino u64, d_off s64,
// d_reclen u16, d_type u8, d_name) and the offset of the next entry.
func dirent(b []byte, off int) (nameOff, next int) {
	reclen := int(*(*uint16)(unsafe.Pointer(&b[off+16])))
	return off + 19, off + reclen
}

// verify checks that the cached fds of pid still hold their inodes.
func (w *attrWorker) verify(a *Attributor, r *attrRun, pid int, cands []attrSeen) attrResult {
	res := attrResult{pid: pid}
	dfd, err := a.open(a.ProcRoot + "/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		classify(&res, err)
		return res
	}
	defer unix.Close(dfd)
	for _, c := range cands {
		w.name = strconv.AppendInt(w.name[:0], int64(c.fd), 10)
		w.name = append(w.name, 0)
		ino, err := w.readSocketLink(dfd, &w.name[0])
		r.links.Add(1)
		c.cached = true
		if err == nil && ino == c.ino {
			c.matched = r.claim(ino, Owner{PID: pid, FD: int(c.fd)})
		}
		res.seen = append(res.seen, c)
	}
	return res
}

// readSocketLink reads the link name (NUL-terminated) relative to dfd and
// returns the inode if it is "socket:[<inode>]", 0 for any other target. It
// calls readlinkat(2) directly so the name is passed from the getdents buffer
// without the string conversion unix.Readlinkat makes on every call.
func (w *attrWorker) readSocketLink(dfd int, name *byte) (uint64, error) {
	n, _, errno := unix.Syscall6(unix.SYS_READLINKAT, uintptr(dfd), uintptr(unsafe.Pointer(name)),
		uintptr(unsafe.Pointer(&w.link[0])), uintptr(len(w.link)), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return parseSocketLink(w.link[:n]), nil
}

// parseSocketLink returns the inode of a "socket:[<inode>]" link target, 0
// for anything else (files, pipes, anon_inode:...).
func parseSocketLink(b []byte) uint64 {
	const prefix = "socket:["
	if len(b) < len(prefix)+2 || string(b[:len(prefix)]) != prefix || b[len(b)-1] != ']' {
		return 0
	}
	var ino uint64
	for _, c := range b[len(prefix) : len(b)-1] {
		if c < '0' || c > '9' {
			return 0
		}
		ino = ino*10 + uint64(c-'0')
	}
	return ino
}

// parseFDName parses a NUL-terminated decimal fd name.
func parseFDName(b []byte) (int, bool) {
	fd := 0
	i := 0
	for ; i < len(b) && b[i] != 0; i++ {
		if b[i] < '0' || b[i] > '9' || i > 9 {
			return 0, false
		}
		fd = fd*10 + int(b[i]-'0')
	}
	return fd, i > 0
}

// listPIDs returns the numeric entries of procRoot, sorted.
func listPIDs(procRoot string) ([]int, error) {
	f, err := os.Open(procRoot)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", procRoot, err)
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '1' || n[0] > '9' {
			continue
		}
		if p, err := strconv.Atoi(n); err == nil {
			pids = append(pids, p)
		}
	}
	slices.Sort(pids)
	return pids, nil
}
