package netstat

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/kdiag/kdiag/netstat/sockfd"
)

// Where a Scanner reads which process holds which socket (Scanner.FDs).
const (
	// FDsAuto reads the kernel's socket fd iterator (package sockfd:
	// every socket fd of every process in one pass, about a tenth of a
	// readlinkat's cost each) where it can be had (root, Linux 5.11 with
	// BTF, ProcRoot /proc), else /proc/<pid>/fd.
	FDsAuto = "auto"
	// FDsIterator is the iterator or an error.
	FDsIterator = "iterator"
	// FDsProc reads /proc/<pid>/fd (readlinkat of each fd link).
	FDsProc = "proc"
)

// FDSourceNames lists the values of Scanner.FDs, for flag help.
var FDSourceNames = []string{FDsAuto, FDsIterator, FDsProc}

// fdPass is one pass over every socket fd of every process: a
// sockfd.Iterator, or a fake in tests.
type fdPass interface {
	Each(fn func(sockfd.FD) bool) error
}

// openIterator returns the Scanner's iterator, opened on first use (with
// proto when asked; an iterator opened without is reopened with it), or
// nil when the scan reads /proc: FDs says so, or auto finds the iterator
// unavailable (remembered, so a repeated scan does not try again). Only
// FDsIterator makes unavailability an error.
func (s *Scanner) openIterator(proto bool) (fdPass, error) {
	mode := s.FDs
	if mode == "" {
		mode = FDsAuto
	}
	switch mode {
	case FDsProc:
		return nil, nil
	case FDsAuto, FDsIterator:
	default:
		return nil, fmt.Errorf("unknown fd source %q (want one of %s)", s.FDs, strings.Join(FDSourceNames, ", "))
	}
	if s.iter != nil && (s.iterProto || !proto) {
		return s.iter, nil
	}
	if mode == FDsAuto && (s.iterErr != nil || s.ProcRoot != "/proc" || s.euid != 0 || runtime.GOOS != "linux") {
		return nil, nil
	}
	if s.iter != nil {
		s.iter.Close()
		s.iter = nil
	}
	it, err := sockfd.Open(proto)
	if err != nil {
		s.iterErr = err
		if mode == FDsIterator {
			return nil, err
		}
		return nil, nil
	}
	s.iter, s.iterProto = it, proto
	return it, nil
}

// Close releases what the Scanner keeps open between scans (the socket fd
// iterator). A Scanner may scan again after Close.
func (s *Scanner) Close() error {
	if s.iter == nil {
		return nil
	}
	err := s.iter.Close()
	s.iter = nil
	return err
}

// prefetch is a pass over every socket fd that a one-shot scan runs while
// the kernel dumps the sockets: the dump waits on recvmsg on one core while
// the pass reads the fds on the other, and attribution then only looks up
// the inodes the dump listed (see Attributor.table).
type prefetch struct {
	done  chan struct{}
	table *fdTable
	err   error
	// wanted, once find has set it, is what the pass may stop at: the
	// inodes the dump listed and the query kept (see find).
	wanted atomic.Pointer[wantSet]
	// proto: the pass reads every fd (a query with CLOSE) and never stops.
	proto bool
}

// wantSet is the inodes a pass looks for, each marked once seen, and how
// many are still unseen. The pass's goroutine owns it once find has
// handed it over.
type wantSet struct {
	seen    map[uint64]bool
	missing int
}

// find tells the pass the sockets attribution will look up: once it has
// listed a holder of each, it stops, as a walk of /proc stops once nothing
// is missing. The dump ends before the pass over every fd does (on 2 cores
// the two slow each other down), and the processes after the last holder
// need not be read.
func (p *prefetch) find(socks []Socket) {
	if p.proto {
		return
	}
	w := &wantSet{seen: make(map[uint64]bool, len(socks))}
	for i := range socks {
		if ino := socks[i].Inode; ino != 0 {
			if _, dup := w.seen[ino]; !dup {
				w.seen[ino] = false
				w.missing++
			}
		}
	}
	p.wanted.Store(w)
}

// saw marks ino seen in w, and reports whether nothing is missing now.
func (w *wantSet) saw(ino uint64) bool {
	if seen, ok := w.seen[ino]; ok && !seen {
		w.seen[ino] = true
		w.missing--
	}
	return w.missing == 0
}

// prefetchFrom is the number of TCP sockets (sockstat's inuse, summed over
// the namespaces a scan dumps) from which a one-shot scan that reads only
// the holders of the sockets it reports passes over every socket fd
// instead of walking /proc. Opening the iterator costs 3.5-5 ms (the
// kernel's BTF parsed, the program verified), which a small dump does not
// hide: at 1,000 CLOSE_WAIT (2,000 sockets) a close-wait scan took 17.7 ms
// with it and 16.1 ms without, at 20,000 (80,000 sockets) 157 ms with it
// and 228 ms without (bench/ab.sh, load 4-5). A scan that reads every fd
// (a query with CLOSE) always passes: 21 against 26 ms at 2,000 sockets.
const prefetchFrom = 5000

// restrictedFrom is the number of processes a --pid or --process scan
// reads from which it passes over every socket fd rather than walking
// theirs (auto): a few processes' fds cost less to read than every
// process's.
const restrictedFrom = 8

// startPrefetch opens the iterator and starts a pass that keeps the fds
// of pids (every process when all), or returns nil when the scan reads
// /proc instead: FDs says so, or auto finds the iterator unavailable, or
// the scan is small and reads only some fds (see prefetchFrom). An error is
// one of FDsIterator's.
func (s *Scanner) startPrefetch(ctx context.Context, groups []nsGroup, pids []int, all, proto bool) (*prefetch, error) {
	if (s.FDs == "" || s.FDs == FDsAuto) && !all && len(pids) <= restrictedFrom {
		// --pid or --process chose a few processes: a walk of their fds
		// reads only theirs, the pass every process's.
		return nil, nil
	}
	if (s.FDs == "" || s.FDs == FDsAuto) && !proto {
		n := 0
		for _, g := range groups {
			pid := 0
			if !g.host {
				pid = g.pids[0]
			}
			n += tcpInUse(s.ProcRoot, pid)
		}
		if n < prefetchFrom {
			return nil, nil
		}
	}
	if !s.mayIterate(proto) {
		return nil, nil
	}
	// Opened in the pass's goroutine: parsing the BTF and loading the
	// program (3.5 ms) then overlap the dump as well.
	p := &prefetch{done: make(chan struct{}), table: &fdTable{}, proto: proto}
	keep := make(map[int32]bool, len(pids))
	for _, pid := range pids {
		keep[int32(pid)] = true
	}
	go func() {
		defer close(p.done)
		it, err := s.openIterator(proto)
		if err == nil && it == nil {
			err = errNoIterator
		}
		if err != nil {
			p.err = err
			return
		}
		var w *wantSet
		p.err = it.Each(func(f sockfd.FD) bool {
			if !all && !keep[f.PID] {
				return ctx.Err() == nil
			}
			p.table.add(f)
			if w == nil {
				if w = p.wanted.Load(); w != nil {
					// Handed over just now: count what was read before.
					done := false
					p.table.each(func(r fdRec) bool {
						done = w.saw(r.ino)
						return !done
					})
					if done {
						return false
					}
				}
				return ctx.Err() == nil
			}
			return !w.saw(f.Inode) && ctx.Err() == nil
		})
		if p.err == nil {
			p.err = ctx.Err()
		}
	}()
	return p, nil
}

// errNoIterator: auto found the iterator unavailable (Scanner.iterErr says
// why); the scan walks /proc.
var errNoIterator = errors.New("no socket fd iterator")

// mayIterate reports whether openIterator may give an iterator, without
// opening it: not when FDs is proc, or auto has found it unavailable
// before or cannot have it here.
func (s *Scanner) mayIterate(proto bool) bool {
	switch s.FDs {
	case FDsProc:
		return false
	case FDsIterator:
		return true
	}
	if s.iter != nil && (s.iterProto || !proto) {
		return true
	}
	return s.iterErr == nil && s.ProcRoot == "/proc" && s.euid == 0 && runtime.GOOS == "linux"
}

// wait returns the pass's fds; the caller releases them.
func (p *prefetch) wait() (*fdTable, error) {
	<-p.done
	if p.err != nil {
		p.table.release()
		return nil, p.err
	}
	return p.table, nil
}

// pass attributes r's wanted inodes from one pass over every socket fd of
// every process, instead of a probe and walks of /proc/<pid>/fd: from
// a.table when a one-shot scan prefetched it, else from a.fds. Every pid
// of pids is then read whole (complete), those the pass saw no socket of
// included. It returns false when the pass failed before its end, which
// leaves the caller to walk /proc.
func (a *Attributor) pass(r *attrRun, pids []int) ([]attrResult, bool) {
	res := make(map[int32]*attrResult, len(pids))
	out := make([]attrResult, len(pids))
	for i, p := range pids {
		out[i] = attrResult{pid: p, walked: true, complete: true}
		res[int32(p)] = &out[i]
	}
	ended := true
	var (
		lastPID int32 = -1
		x       *attrResult
	)
	each := func(f sockfd.FD) bool {
		if f.PID != lastPID {
			// A pass lists a process's fds together: one lookup a process.
			lastPID, x = f.PID, res[f.PID]
		}
		if x == nil {
			return true
		}
		r.links.Add(1)
		fd := int32(f.FD)
		if !a.NoCache {
			x.seen = append(x.seen, attrSeen{ino: f.Inode, fd: fd})
		}
		if !r.claim(f.Inode, Owner{PID: int(f.PID), FD: int(f.FD)}) && r.collect && f.IsTCP() {
			if !r.want.has(f.Inode) {
				x.others = append(x.others, attrSeen{ino: f.Inode, fd: fd, proto: uint8(familyOf(f))})
			}
		}
		if r.done() {
			ended = false
			return false
		}
		return true
	}
	if a.table != nil {
		a.table.each(func(r fdRec) bool { return each(r.sockFD()) })
	} else if err := a.fds.Each(each); err != nil {
		return nil, false
	}
	if !ended {
		// Stopped once nothing was missing: the pids after the last one
		// seen were not read.
		for i := range out {
			out[i].complete = false
		}
	}
	return out, true
}

// familyOf is the Family of a TCP socket fd.
func familyOf(f sockfd.FD) Family {
	if f.IPv6() {
		return IPv6
	}
	return IPv4
}

// heldPass returns, from the prefetched table or one pass of a.fds, the
// TCP socket fds of pids whose inode known (sorted) lacks: heldTCP's walk of
// every fd, for the pids no attribution pass read whole; and notes in
// holders the pids holding a socket of match (when it is not nil). false
// when there is neither or the pass failed.
func (a *Attributor) heldPass(pids []int, known, match []uint64, holders map[int]bool) ([]heldFD, bool) {
	if (a.fds == nil && a.table == nil) || len(pids) == 0 {
		return nil, false
	}
	keep := make(map[int32]bool, len(pids))
	for _, p := range pids {
		keep[int32(p)] = true
	}
	var out []heldFD
	each := func(f sockfd.FD) bool {
		if !keep[f.PID] || !f.IsTCP() {
			return true
		}
		if !inSorted(known, f.Inode) {
			out = append(out, heldFD{pid: int(f.PID), fd: int(f.FD), ino: f.Inode, family: familyOf(f)})
		} else if holders != nil && inSorted(match, f.Inode) {
			holders[int(f.PID)] = true
		}
		return true
	}
	if a.table != nil {
		a.table.each(func(r fdRec) bool { return each(r.sockFD()) })
		a.heldPasses++
		return out, true
	}
	if a.fds.Each(each) != nil {
		return nil, false
	}
	a.heldPasses++
	return out, true
}
