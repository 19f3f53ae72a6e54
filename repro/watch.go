// The loop of a RunCommand run: sample CMD's processes and their sockets,
// drive the broker's idle closes, and know when to stop.

package repro

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/netstat"
)

// maxThreadSamples bounds the thread samples kept of a client that holds
// sockets, read at most every threadEvery while it holds them: reading a
// thread's system call (/proc/<pid>/task/<tid>/syscall) waits for the
// thread to be off its CPU, the dearest read of a sample.
const (
	maxThreadSamples = 30
	threadEvery      = time.Second
)

// watch is one RunCommand run in progress.
type watch struct {
	o       CommandOptions
	res     *CommandResult
	cluster *broker.Cluster
	log     *brokerLog
	run     *command
	tree    *tree
	tl      *timeline

	// stopMS is when the run began to stop CMD (ms since it started).
	stopMS int64

	identified map[int]clients.Client
	threads    [][]clients.ThreadSample // the client's, while it held sockets
	// pending is the latest thread sample, kept once the socket sample
	// after it still shows sockets held: a thread read just as the client
	// got to its sockets (a callback that returned) would otherwise stand
	// for the hold, polling, though it held them until then.
	pending    []clients.ThreadSample
	threadsPID int
	threadsAt  time.Time // the last read
	worst      int       // the most sockets held in one sample, for the excerpt
}

// loop samples until the run's end: Duration after the first connection,
// ConnectTimeout without one, CMD and its processes gone, or ctx done. A
// run past Duration goes on, for up to MaxHold, while a socket the broker
// closed is held and not yet held for MaxHold: its outcome is not known yet.
func (w *watch) loop(ctx context.Context) {
	o := w.o
	t := time.NewTicker(o.SampleInterval)
	defer t.Stop()
	var firstConnect, deadline, nextRound time.Time
	sweepEvery := 5
	exited := w.run.done // nil once seen: CMD's children may outlive it
	emptySweeps := 0
	for n := 0; ; n++ {
		// A driven close first, so that the sample after it shows what it
		// closed; none past Duration, so that each close's outcome is
		// known by the end (at most MaxHold later).
		if now := time.Now(); o.Closes == ClosesDriven && !nextRound.IsZero() && !now.Before(nextRound) && now.Before(deadline) {
			closed := w.cluster.CloseIdle()
			w.res.Rounds = append(w.res.Rounds, Round{AtMS: now.Sub(w.run.started).Milliseconds(), Closed: closed})
			nextRound = nextRound.Add(o.BrokerIdle)
			if !nextRound.After(now) {
				nextRound = now.Add(o.BrokerIdle) // after a slow sample: no burst of rounds
			}
		}
		// Once CMD has exited, every refresh sweeps the environments: what
		// it started and let go is found only so.
		w.tree.refresh(n%sweepEvery == 0 || w.run.exited())
		now := w.sample(ctx)
		if firstConnect.IsZero() && w.res.FirstConnectMS >= 0 {
			firstConnect = w.run.started.Add(time.Duration(w.res.FirstConnectMS) * time.Millisecond)
			deadline = firstConnect.Add(o.Duration)
			nextRound = firstConnect.Add(o.BrokerIdle)
		}
		// Gone: CMD exited and two sweeps in a row, a sample apart, found
		// nothing of it (a process forked while a sweep read /proc is
		// seen by the next).
		if w.run.exited() && len(w.tree.live()) == 0 {
			emptySweeps++
		} else {
			emptySweeps = 0
		}
		gone := emptySweeps >= 2
		switch {
		case ctx.Err() != nil:
			w.res.Interrupted = true
			return
		case gone:
			return
		case firstConnect.IsZero() && now.Sub(w.run.started) >= o.ConnectTimeout:
			return
		case !deadline.IsZero() && !now.Before(deadline):
			if !w.undecided(now) || !now.Before(deadline.Add(o.MaxHold)) {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-exited:
			// Look once more at once: its processes may be gone too.
			exited = nil
		}
	}
}

// sample takes one sample of the tree's sockets and returns when it was
// complete.
func (w *watch) sample(ctx context.Context) time.Time {
	// The broker's events first, then the scan: every connection the
	// timeline knows was accepted before the scan began, so a socket at a
	// client address the scan finds is the newest connection's from it
	// (timeline.socketOf).
	w.tl.events(w.log.snapshot())
	pids := w.tree.live()
	var socks []netstat.Socket
	if len(pids) > 0 {
		// The states a client's fd can be in, but CLOSE: the held CLOSE
		// sockets are found by fd (ProcFDHolds), one readlink each, where
		// asking netstat for CLOSE passes over every fd of every process.
		snap, err := w.o.Scanner.Scan(ctx, netstat.Query{PIDs: pids, States: clientStates})
		if err != nil && ctx.Err() == nil {
			w.note("reading the command's sockets: " + err.Error())
		}
		if snap != nil {
			socks = snap.Sockets
			w.res.Snapshots = append(w.res.Snapshots, *snap)
		}
	}
	now := time.Now()
	s := w.tl.sample(now, socks, ProcFDHolds(w.o.ProcRoot))
	w.res.Series = append(w.res.Series, s)
	if w.res.FirstConnectMS < 0 && len(w.tl.conns) > 0 {
		w.res.FirstConnectMS = w.tl.conns[0].OpenedMS
	}
	for _, c := range w.tl.conns {
		if c.PID != 0 && w.tree.has(c.PID) {
			w.identify(c.PID)
		}
	}
	held := s.CloseWait + s.HeldClose
	if w.pending != nil {
		if held > 0 {
			w.threads = append(w.threads, w.pending)
		}
		w.pending = nil
	}
	if held > 0 {
		w.sampleThreads()
		if held > w.worst {
			w.worst = held
			w.res.Excerpt = excerpt(socks, w.tl)
		}
	}
	if w.o.Progress != nil {
		w.o.Progress(s)
	}
	return now
}

// undecided says whether a socket the broker closed is still held and not
// yet for MaxHold: the run waits for its outcome.
func (w *watch) undecided(now time.Time) bool {
	for _, c := range w.tl.conns {
		if c.ClosedBy == "broker" && c.GoneMS < 0 && c.HeldMS() < w.o.MaxHold.Milliseconds() {
			return true
		}
	}
	return false
}

// identify names pid's client library once.
func (w *watch) identify(pid int) {
	if _, ok := w.identified[pid]; ok {
		return
	}
	c, err := w.o.Identify(pid)
	if err != nil {
		c = clients.Client{Evidence: []string{err.Error()}}
	}
	w.identified[pid] = c
}

// sampleThreads reads the threads of the process holding the most
// connections, while it holds sockets the broker closed: what its network
// thread was doing then (clients.Classify, at the end). The read waits in
// pending for the next socket sample, which keeps it only if sockets are
// still held.
func (w *watch) sampleThreads() {
	pids := w.tl.pids()
	if len(pids) == 0 || len(w.threads) >= maxThreadSamples || time.Since(w.threadsAt) < threadEvery {
		return
	}
	w.threadsAt = time.Now()
	if w.threadsPID != pids[0] {
		w.threadsPID, w.threads = pids[0], nil
	}
	if ts, err := clients.ReadThreads(w.o.ProcRoot, pids[0]); err == nil {
		w.pending = ts
	}
}

func (w *watch) note(s string) {
	for _, n := range w.res.Notes {
		if n == s {
			return
		}
	}
	w.res.Notes = append(w.res.Notes, s)
}

// finish fills the result from what the run saw: the connections'
// outcomes, the client, its threads, the processes, CMD's exit, growth and
// the verdict.
func (w *watch) finish() {
	res, o := w.res, w.o
	w.tl.finish(o.MaxHold, w.stopMS)
	res.Connections = w.tl.conns
	res.OtherRemotes = w.tl.otherRemotes()
	res.Processes = w.tree.all()
	if pids := w.tl.pids(); len(pids) > 0 {
		res.ClientPID = pids[0]
		res.Client = w.identified[pids[0]]
		if lib := res.Client.Catalog(); lib != nil && len(w.threads) > 0 && w.threadsPID == pids[0] {
			th := clients.Classify(lib, w.threads, clients.HostArch)
			if len(th.Network) > 0 {
				res.Threads = &th
			}
		}
	}
	select {
	case <-w.run.done:
		ex := &ExitInfo{Status: "exit status 0", AtMS: w.run.exitAt.Sub(w.run.started).Milliseconds()}
		if w.run.waitErr != nil {
			ex.Status = w.run.waitErr.Error()
		}
		if ps := w.run.cmd.ProcessState; ps != nil {
			ex.Code = ps.ExitCode()
		}
		ex.ByKdiag = w.stoppedByKdiag()
		res.Exit = ex
	default:
	}
	res.StderrTail = w.run.stderr.Lines()
	res.Grew, res.ConnectionsFrom, res.ConnectionsTo = connectionGrowth(res.Series)
	if len(res.Left) > 0 {
		w.note(fmt.Sprintf("%s of the command's processes still there after SIGKILL: %v", human.Plural(len(res.Left), "process"), res.Left))
	}
	judgeCommand(res, o)
}

// stoppedByKdiag says whether CMD ended because the run stopped it: it
// exited after the run's last sample.
func (w *watch) stoppedByKdiag() bool {
	if len(w.res.Series) == 0 {
		return false
	}
	last := w.run.started.Add(w.res.Series[len(w.res.Series)-1].Elapsed)
	return !w.run.exitAt.Before(last) && !w.res.Interrupted
}

// connectionGrowth is growth over what a command holds: ESTABLISHED,
// CLOSE_WAIT and CLOSE.
func connectionGrowth(series []Sample) (bool, int, int) {
	held := make([]Sample, len(series))
	for i, s := range series {
		held[i] = Sample{Established: s.Established, CloseWait: s.CloseWait + s.HeldClose}
	}
	return growth(held)
}

// excerpt lists the sockets of one sample to the brokers, as ss -tanpo
// would: state, Recv-Q, Send-Q, local, peer, process; a held CLOSE socket
// (ss does not list it: it is in no table) shows the addresses it had.
func excerpt(socks []netstat.Socket, tl *timeline) []string {
	var out []string
	for _, so := range socks {
		local, peer := unmap(so.Local).String(), unmap(so.Remote).String()
		if !tl.brokers[peer] {
			continue
		}
		state := strings.ReplaceAll(so.State.String(), "_", "-")
		out = append(out, fmt.Sprintf("%-11s %-6d %-6d %-21s %-21s pid=%d,fd=%d", state, so.RecvQ, so.SendQ, local, peer, so.PID, so.FD))
	}
	for _, c := range tl.conns {
		if c.heldNow {
			out = append(out, fmt.Sprintf("%-11s %-6d %-6d %-21s %-21s pid=%d,fd=%d (held: no longer in the kernel's tables)", "CLOSE", 0, 0, c.Client, c.Broker, c.PID, c.fd))
		}
	}
	return out
}
