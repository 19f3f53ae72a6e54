// Package watch implements `kdiag watch`: scan at an interval, show the
// counts live, and on exit say what the series shows (the analyzer's
// findings); optionally record the snapshots, serve Prometheus metrics,
// write a node_exporter textfile and a report.
package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/internal/atomicfile"
	"github.com/kdiag/kdiag/internal/cmd/scan"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/metrics"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/netstat/events"
	"github.com/kdiag/kdiag/record"
	"github.com/kdiag/kdiag/report"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/spf13/cobra"
)

// WatchOptions are the parsed flags of `kdiag watch` and its dependencies.
type WatchOptions struct {
	IO *cmdutil.IOStreams
	// Context is the run's parent context (SIGINT and SIGTERM are added to
	// it); nil means context.Background.
	Context context.Context
	// Scan takes one snapshot: a netstat.Scanner's Scan, kept for the whole
	// run so repeated scans reuse what it learned (which fd held which inode).
	Scan func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error)
	// Recycle, when set, is given each snapshot once the loop is done
	// with it (a netstat.Scanner's Recycle: the next scan reuses its
	// memory); not when the metrics collector keeps it for a scrape.
	Recycle func(*netstat.Snapshot)
	// DropRecycled, when set, is called once the loop ends: the scanner
	// lets go of what Recycle gave it, before the final analysis.
	DropRecycled func()

	Filters  cmdutil.Filters
	Query    netstat.Query
	Interval time.Duration
	Duration time.Duration
	// Count stops after that many scans; 0 is no limit.
	Count    int
	Window   time.Duration
	StuckAge time.Duration
	Record   string
	Listen   string
	Textfile string
	Report   string
	Quiet    bool
	// Verbose (-v) says each scan's details (netstat.Snapshot.Details:
	// sockets closed and processes exited while it ran) as they come,
	// each once per run.
	Verbose bool
	// Check, when set (--warn or --crit), makes the watch a monitoring
	// check of its last scan: scan's check line first and its exit code.
	Check *Thresholds
	// Events is --events: auto, on or off (see openEvents).
	Events string
	// Refresh is --refresh: with events, the longest time between dumps.
	Refresh time.Duration
	// CPUProfile, when set (hidden --cpuprofile), is where the whole run's
	// CPU profile goes: what BENCHMARKS.md's watch figures are broken down by.
	CPUProfile string
	// MemProfile, when set (hidden --memprofile), is where a profile of
	// the heap in use when the loop ends goes: what BENCHMARKS.md's watch
	// memory figures are broken down by.
	MemProfile string

	// Listening, when set, is called with the metrics address once the
	// listener is up (tests scrape it).
	Listening func(addr string)
	// Scanned, when set, is called after each successful scan (tests).
	Scanned func(n int, s *netstat.Snapshot)
	// Identify names each process's Kafka client for the diagnosis
	// (clients.Identifier of the proc root); nil: from the scan's record.
	Identify func(netstat.Process) clients.Client
}

// NewCmdWatch returns `kdiag watch`. runF, when non-nil, replaces runWatch.
func NewCmdWatch(f *cmdutil.Factory, runF func(*WatchOptions) error) *cobra.Command {
	opts := &WatchOptions{IO: f.IO}
	warn, crit := -1, -1
	cmd := &cobra.Command{
		Use:   "watch [flags]",
		Short: "Scan sockets at an interval: live counts, CLOSE_WAIT growth verdicts, metrics, recordings",
		Long: `Watch scans the host's TCP sockets every --interval with the same filters as
kdiag scan, and shows per process the counts per state, the CLOSE_WAIT growth
rate and the oldest CLOSE_WAIT age: a table redrawn in place on a terminal,
one plain line per scan otherwise.

On exit (after --duration or --count, or on Ctrl-C / SIGTERM) it prints the
analyzer's findings: which process leaks CLOSE_WAIT toward which brokers,
since when, how fast, what Recv-Q says, and the likely causes with the
kdiag lint rules that check them.

A verdict needs at least 6 samples over 30 s: "growing" is a least-squares
slope at least 3 standard errors above zero with a fitted change of 3 or
more sockets; "draining" the same downward; "steady" otherwise.

A --pid that names no process at the first scan stops the watch, UNKNOWN
(exit 3); one whose process exits during the watch is said, and the watch
goes on.

As root (or with CAP_BPF and CAP_PERFMON), --events auto attaches an eBPF
counter of the kernel's TCP state changes: a scan in which no watched socket
changed state serves the last dump again, ages advanced, instead of dumping;
a full dump still runs every --refresh. With --port, --brokers or --remote
HOST:PORT only the changes of sockets to those ports count. The events do not
report TIME_WAIT, which the default --state all includes: watch named states,
e.g. --state close-wait,established, to use them.

  --record FILE    appends every snapshot as one JSON line (replay with kdiag report)
  --listen ADDR    serves Prometheus metrics on http://ADDR/metrics, to at
                   most 64 connections at once (a quarter of the open-file
                   limit when that is fewer, the rest kept for the scans)
  --textfile DIR   writes DIR/kdiag.prom for node_exporter's textfile collector
  --report PATH    writes a report at exit (.md: Markdown, else HTML)

On a broker host, --listen-ports 9092 (or --by-client --process kafka, the
ports the kafka processes listen on) watches the broker's side of its
clients' connections: the live table has a row per client address, with
ESTABLISHED, FIN-WAIT-2 (closed by the broker, not yet by the client), and
NEW/MIN, the connections it opened per minute over the last minute; the
metrics add kdiag_broker_client_connections{client,state} and
kdiag_broker_client_connections_opened_per_minute{client}. See docs/scan.md.

With --warn or --crit the watch ends as a monitoring check of its last scan,
as kdiag scan's (the Nagios plugin convention): the one-line summary before
the findings (the first line with --quiet), exit 0 OK, 1 WARNING, 2 CRITICAL,
3 UNKNOWN (the last scan failed, or sockets kdiag could not attribute could
change the status), on the largest count of CLOSE_WAIT plus held CLOSE
sockets of one process ("more than N").`,
		Example: `  # CLOSE_WAIT toward a Kafka cluster, for 10 minutes, then the findings
  kdiag watch --state close-wait,established --brokers kafka-1:9092 --duration 10m

  # record for later, and write an HTML report at the end
  kdiag watch --process java --record watch.jsonl --report watch.html

  # as a node agent: metrics only, every 15 s
  kdiag watch --state close-wait,established --interval 15s --listen 127.0.0.1:9813 --quiet

  # on a broker host: its clients by address, with their rate of new connections
  kdiag watch --listen-ports 9092 --listen 127.0.0.1:9813

  # a Nagios check over a minute: WARNING above 100 CLOSE_WAIT in one process at the end, CRITICAL above 1000
  kdiag watch --state close-wait --duration 1m --quiet --warn 100 --crit 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Filters.StatesGiven = cmd.Flags().Changed("state")
			if cmd.Flags().Changed("warn") || cmd.Flags().Changed("crit") {
				opts.Check = &Thresholds{Warn: warn, Crit: crit}
			}
			if err := opts.complete(); err != nil {
				return err
			}
			if opts.Identify == nil {
				opts.Identify = clients.Identifier(f.ProcRoot)
			}
			if opts.Scan == nil {
				sc, closeEvents, err := opts.scanner(f.ProcRoot)
				if errors.Is(err, events.ErrUnavailable) && opts.Events == "auto" {
					// auto goes on without: every scan dumps, as with off.
					fmt.Fprintf(opts.IO.ErrOut, "kdiag watch: %v; every scan dumps (--events off says this is meant)\n", err)
					err = nil
				}
				if err != nil {
					return err
				}
				defer closeEvents()
				opts.Scan, opts.Recycle, opts.DropRecycled = sc.Scan, sc.Recycle, sc.DropRecycled
			}
			if runF != nil {
				return runF(opts)
			}
			return runWatch(opts)
		},
	}
	fl := cmd.Flags()
	cmdutil.AddFilterFlags(fl, &opts.Filters)
	fl.DurationVar(&opts.Interval, "interval", time.Second, "time between scans")
	fl.DurationVar(&opts.Duration, "duration", 0, "stop after this long (0: until Ctrl-C or SIGTERM)")
	fl.IntVar(&opts.Count, "count", 0, "stop after this many scans (0: no limit)")
	fl.DurationVar(&opts.Window, "window", time.Hour, "history the analyzer keeps for verdicts and the report (0: all)")
	fl.DurationVar(&opts.StuckAge, "stuck-age", time.Minute, "CLOSE_WAIT older than this is a finding even when not growing")
	fl.StringVar(&opts.Record, "record", "", "append each snapshot to `FILE` as a JSON line")
	fl.StringVar(&opts.Listen, "listen", "", "serve Prometheus metrics on `ADDR` (e.g. 127.0.0.1:9813) at /metrics; at most 64 connections at once, or a quarter of the open-file limit if fewer")
	fl.StringVar(&opts.Textfile, "textfile", "", "write metrics to `DIR`/kdiag.prom for node_exporter's textfile collector")
	fl.StringVar(&opts.Report, "report", "", "write a report to `PATH` at exit (.md: Markdown, else HTML)")
	fl.BoolVarP(&opts.Quiet, "quiet", "q", false, "no live output (metrics, recording and findings only)")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "also note, once each, what a busy host makes of every scan: sockets closed and processes exited while it ran")
	fl.IntVar(&warn, "warn", -1, "monitoring: end WARNING (exit 1) when a process has more than N CLOSE_WAIT (plus held CLOSE) sockets at the last scan")
	fl.IntVar(&crit, "crit", -1, "monitoring: end CRITICAL (exit 2) when a process has more than N CLOSE_WAIT (plus held CLOSE) sockets at the last scan")
	fl.StringVar(&opts.Events, "events", "auto", "dump only when the kernel reports a TCP state change (auto: when it can attach, as root; on: required; off: dump every interval)")
	fl.DurationVar(&opts.Refresh, "refresh", netstat.DefaultRefreshEvery, "with events, dump at least this often all the same (holders, Recv-Q and Send-Q change without a state change)")
	fl.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.StringVar(&opts.MemProfile, "memprofile", "", "write a profile of the heap in use at the end of the run to this file")
	_ = fl.MarkHidden("memprofile")
	return cmd
}

func (o *WatchOptions) complete() error {
	q, err := o.Filters.Query()
	if err != nil {
		return err
	}
	o.Query = q
	switch o.Events {
	case "auto", "on", "off":
	default:
		return cmdutil.UsageErrorf("--events %q: want auto, on or off", o.Events)
	}
	if o.Events == "on" && !q.Gateable() {
		return cmdutil.UsageErrorf("--events on: the kernel's state-change events do not report TIME_WAIT or NEW_SYN_RECV sockets, which --state %s includes; choose states without them, e.g. --state close-wait,established", o.Filters.States)
	}
	if o.Refresh <= 0 {
		return cmdutil.UsageErrorf("--refresh %s: want a positive duration, e.g. 10s", o.Refresh)
	}
	if o.Interval < 10*time.Millisecond {
		return cmdutil.UsageErrorf("--interval %s: use at least 10ms", o.Interval)
	}
	if o.Duration < 0 || o.Count < 0 || o.Window < 0 {
		return cmdutil.UsageErrorf("--duration, --count and --window take values of 0 or more")
	}
	if o.Listen != "" {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			return cmdutil.UsageErrorf("--listen %q: want HOST:PORT, e.g. 127.0.0.1:9813", o.Listen)
		}
	}
	if o.Textfile != "" {
		if st, err := os.Stat(o.Textfile); err != nil || !st.IsDir() {
			return cmdutil.UsageErrorf("--textfile %q: not a directory (node_exporter's --collector.textfile.directory)", o.Textfile)
		}
	}
	if o.Report != "" {
		// Now, not when the watch ends: hours later, naming a temporary file.
		if err := checkReportPath(o.Report); err != nil {
			return cmdutil.UsageErrorf("--report %s: %v", o.Report, err)
		}
	}
	if o.Check != nil {
		return scan.CheckThresholds(o.Check.Warn, o.Check.Crit)
	}
	return nil
}

// scanner returns the Scanner the options ask for over procRoot, gated by
// the kernel's state-change counter when --events has one opened, and the
// function that detaches it.
func (o *WatchOptions) scanner(procRoot string) (*netstat.Scanner, func(), error) {
	sc := netstat.NewScanner(procRoot)
	sc.Source = o.Filters.Source
	sc.FDs = o.Filters.FDs
	sc.RefreshEvery = o.Refresh
	// The tracker and the metrics count the sockets in any order; a
	// recording is read by people, sorted.
	sc.Unordered = o.Record == ""
	c, err := openEvents(o.Events, procRoot, o.Query, listenPort(o.Listen))
	if err != nil || c == nil {
		return sc, func() {}, err
	}
	sc.Changes = func(mask netstat.StateSet) (uint64, error) {
		n, err := c.Read()
		return n.Touching(uint32(mask)), err
	}
	sc.Transitions = func() ([]netstat.Transition, error) {
		ts, err := c.Transitions()
		out := make([]netstat.Transition, len(ts))
		for i, t := range ts {
			out[i] = netstat.Transition{Local: t.Local, Remote: t.Remote, New: netstat.State(t.New), At: t.At, Sock: t.Sock}
		}
		return out, err
	}
	return sc, func() { c.Close() }, nil
}

// openEvents opens the kernel's TCP state-change counter as --events says:
// nil for off, and for auto when procRoot is not the host's /proc (a
// fixture tree has no kernel behind it) or q cannot be gated (its states
// include TIME_WAIT, as the default all does: nothing to count for). It
// counts only the changes of sockets to q's remote ports, when q has some.
// When it cannot be attached (not
// root, an older kernel) the error wraps events.ErrUnavailable, for auto
// and on alike: the caller says it and, for auto, goes on without.
//
// The sockets of watch's own metrics listener (port listen, 0 for none) are
// left out: each scrape is a connection, whose changes would wake the next
// scan, so that a watch scraped every second dumped every second.
func openEvents(mode, procRoot string, q netstat.Query, listen uint16) (*events.Counter, error) {
	if mode == "off" || (mode == "auto" && (procRoot != "/proc" || !q.Gateable())) {
		return nil, nil
	}
	// Only the changes of sockets the query can keep wake a scan: with
	// --port or --brokers, the rest of the host's connections do not.
	c, err := events.OpenExcept(listen, q.RemotePortSet()...)
	if err != nil {
		return nil, fmt.Errorf("--events %s: %w", mode, err)
	}
	return c, nil
}

// listenPort is the port of a --listen address, 0 for none (complete has
// checked its form).
func listenPort(addr string) uint16 {
	if addr == "" {
		return 0
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(p)
}

// analyzerOptions are the analyzer's options for q: the brokers are
// --brokers, or without it the default Kafka ports, as scan marks them.
func analyzerOptions(q netstat.Query, window, stuck time.Duration) analyzer.Options {
	return analyzer.Options{Window: window, StuckAge: stuck, IsBroker: netstat.IsBroker(q.Brokers)}
}

// watchGCPercent is the garbage collector's target for kdiag watch when
// GOGC is not set: the heap may grow 5% past what the last collection
// left live before the next, not Go's default 100%. A watch holds little
// besides one scan's sockets and the tracker, and allocates little per
// scan once its buffers are reused (Scanner.Recycle): about 0.6 MB a
// scan at 60,000 sockets (most of it reading the processes' /proc
// files), so at 5% a collection comes every scan or two and marks ~19 MB
// in ~5 ms of CPU, against ~270 ms for the scan itself. At 100% the heap
// grew to twice its live size between collections and stayed resident at
// that peak; at 25% it held ~7 MB more than at 10%, and at 10% ~1 MB
// more than at 5% (BENCHMARKS.md, watch's memory).
const watchGCPercent = 5

func runWatch(o *WatchOptions) error {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(watchGCPercent))
	}
	// tablewriter's width cache, an LRU of 8,192 strings its package init
	// makes (0.65 MB), would stay live for the whole watch; the live
	// view's few rows a second do not need it, and the heap gets the
	// memory back. It is the library's global switch; watch draws no
	// other table.
	twwidth.SetCacheCapacity(0)
	if o.CPUProfile != "" {
		f, err := atomicfile.Create(o.CPUProfile, 0o600)
		if err != nil {
			return cmdutil.UsageErrorf("--cpuprofile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var memProfile *os.File
	if o.MemProfile != "" {
		f, err := atomicfile.Create(o.MemProfile, 0o600)
		if err != nil {
			return cmdutil.UsageErrorf("--memprofile: %v", err)
		}
		defer f.Close()
		memProfile = f
		// main turns sampling off; the default rate samples enough of
		// the loop's allocations to see what stays live.
		runtime.MemProfileRate = 512 << 10
	}
	parent := o.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := cmdutil.InterruptContext(parent)
	defer stop()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}

	if o.Textfile != "" {
		// A kdiag killed mid-write leaves its temporary file behind.
		note, err := metrics.CleanTextfileDir(o.Textfile)
		if note != "" {
			fmt.Fprintf(o.IO.ErrOut, "kdiag watch: %s\n", note)
		}
		if err != nil {
			fmt.Fprintf(o.IO.ErrOut, "kdiag watch: --textfile: cleaning up: %v\n", err)
		}
	}
	var clientTr *analyzer.ClientTracker
	if o.Filters.ClientView() {
		q, err := scan.ClientQuery(ctx, o.Scan, o.Query)
		if err != nil {
			return err
		}
		o.Query = q
		clientTr = &analyzer.ClientTracker{Ports: q.ListenPorts}
	}
	aopts := analyzerOptions(o.Query, o.Window, o.StuckAge)
	aopts.Identify = o.Identify
	tracker := analyzer.NewTracker(aopts)
	col := metrics.New()
	col.Analyzer = aopts
	var rec *record.Writer
	if o.Record != "" {
		w, err := record.Open(o.Record)
		if err != nil {
			return cmdutil.UsageErrorf("--record: %v", err)
		}
		rec = w
		defer rec.Close()
	}
	if o.Listen != "" {
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return cmdutil.UsageErrorf("--listen: %v", err)
		}
		if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			fmt.Fprintf(o.IO.ErrOut, "kdiag watch: warning: --listen %s serves pids, process names and remote endpoints, without authentication, to anyone who can reach %s; use 127.0.0.1 unless you mean it (a DaemonSet behind a NetworkPolicy)\n", o.Listen, a)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler(col))
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "kdiag watch: metrics at /metrics")
		})
		// Bounded: timeouts, and a cap on connections within a share of
		// the open-file limit, so that scrapers can never starve the
		// scans of fds or the pod of memory (metrics.Server).
		srv := metrics.NewServer(ln, mux, metrics.ServerOptions{})
		go srv.Serve()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
		fmt.Fprintf(o.IO.ErrOut, "kdiag watch: metrics at http://%s/metrics, at most %d connections at once (the longest idle is closed to make room; idle ones after %s)\n",
			ln.Addr(), srv.Cap, human.Age(metrics.IdleTimeout))
		if o.Listening != nil {
			o.Listening(ln.Addr().String())
		}
	}

	live := &liveView{io: o.IO, interval: o.Interval}
	chk := newChecker(o.Check)
	ticker := time.NewTicker(o.Interval)
	defer ticker.Stop()
	scans, failures := 0, 0
	var lastErr error
	var gone map[int]bool    // --pid processes said to have exited
	var said map[string]bool // details said (-v)
loop:
	for {
		start := time.Now()
		snap, err := o.Scan(ctx, o.Query)
		dur := time.Since(start)
		switch {
		case ctx.Err() != nil:
			break loop
		case err != nil:
			failures++
			lastErr = err
			col.ScanFailed(dur)
			chk.failed(err)
			fmt.Fprintf(o.IO.ErrOut, "kdiag watch: scan failed: %v\n", err)
		default:
			if err := snap.MissingError(); err != nil {
				if scans == 0 {
					// A --pid that names no process: nothing to watch of
					// it, said once, as scan and doctor say it.
					return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: err}
				}
				gone = sayGone(o.IO.ErrOut, snap.Missing, gone)
			}
			if o.Verbose {
				said = sayDetails(o.IO.ErrOut, snap.Details, said)
			}
			scans++
			tracker.Add(snap)
			a := tracker.Current()
			var cs []analyzer.ClientCounts
			if clientTr != nil {
				clientTr.Add(snap)
				if !o.Quiet || o.Listen != "" || o.Textfile != "" {
					cs = clientTr.Clients() // for the live view or the metrics
				}
			}
			if o.Listen != "" || o.Textfile != "" {
				// Only a reader of the metrics needs them: the collector
				// keeps the snapshot until a scrape aggregates it (or
				// Release, before the next scan).
				col.Update(snap, a, dur)
				if clientTr != nil {
					col.UpdateClients(cs)
				}
			}
			if o.Textfile != "" {
				if err := metrics.WriteTextfile(o.Textfile, col); err != nil {
					fmt.Fprintf(o.IO.ErrOut, "kdiag watch: --textfile: %v\n", err)
				}
			}
			if rec != nil {
				if err := rec.Write(snap); err != nil {
					return err
				}
			}
			switch {
			case o.Quiet:
			case clientTr != nil:
				live.drawClients(snap, cs, o.Query.ListenPorts, dur)
			default:
				live.draw(snap, a, dur)
			}
			if o.Scanned != nil {
				o.Scanned(scans, snap)
			}
			chk.scanned(snap)
			if o.Recycle != nil {
				// Nothing holds snap now (the tracker and the recording
				// copy what they keep, and the collector aggregates it
				// if no scrape has): its 7.7 MB at 60,000 sockets are the
				// next dump's, not a new slice every scan.
				col.Release(snap)
				o.Recycle(snap)
			}
		}
		if o.Count > 0 && scans+failures >= o.Count {
			break
		}
		select {
		case <-ctx.Done():
			break loop
		case <-ticker.C:
		}
	}

	if o.DropRecycled != nil {
		// 7.7 MB at 60,000 sockets that the analysis below can use, once
		// a collection has freed them: the analysis allocates its
		// CLOSE_WAIT sockets at once (5.6 MB at case D), which without
		// the collection took fresh memory beside the dropped.
		o.DropRecycled()
		runtime.GC()
	}
	if memProfile != nil {
		// Here, while the tracker and the collector still hold what the
		// loop gave them.
		runtime.GC()
		_ = pprof.Lookup("heap").WriteTo(memProfile, 0)
		runtime.KeepAlive(col)
	}
	if scans == 0 {
		if chk != nil {
			return chk.result(o.IO.Out)
		}
		if lastErr != nil {
			return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("watch: no scan succeeded: %w", lastErr)}
		}
		return nil // stopped before the first scan
	}
	a := tracker.Analysis()
	if !o.Quiet {
		fmt.Fprintln(o.IO.Out)
	}
	var checked error
	if chk != nil {
		// First: what a monitoring system reads.
		checked = chk.result(o.IO.Out)
	}
	if clientTr != nil {
		writeClientSummary(o.IO.Out, clientTr.Clients(), o.Query.ListenPorts)
	}
	if err := report.Text(o.IO.Out, a); err != nil {
		return err
	}
	if err := report.TextNotes(o.IO.ErrOut, "kdiag watch: ", a); err != nil {
		return err
	}
	if o.Report != "" {
		if err := writeReport(o.Report, "kdiag watch", a, nil); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.ErrOut, "kdiag watch: report written to %s\n", o.Report)
	}
	if chk != nil {
		// The check says UNKNOWN itself when what kdiag could not see
		// could change its status, as scan's does.
		return checked
	}
	if a.Unseen.Blind() {
		// What the last scan could not see could hide a leak: the
		// findings above are not the whole truth (UnseenLine said why).
		// Earlier scans' blind spots that did not last (sockets closed
		// while a scan ran, on a host whose connections churn) cannot:
		// a leak's sockets stay.
		return cmdutil.Exit(cmdutil.ExitUnknown)
	}
	return nil
}

// sayGone says, once each, that pids of --pid that were there at the
// first scan have exited since: the watch goes on (with the others, and
// the series it has); it returns the pids said so far.
func sayGone(w io.Writer, missing []int, said map[int]bool) map[int]bool {
	if said == nil {
		said = map[int]bool{}
	}
	var now []int
	for _, p := range missing {
		if !said[p] {
			said[p] = true
			now = append(now, p)
		}
	}
	for _, p := range now {
		fmt.Fprintf(w, "kdiag watch: --pid %d: the process exited during the watch, which goes on\n", p)
	}
	return said
}

// maxSaid bounds the details sayDetails remembers having said: past it,
// it forgets them all, so that a long watch's memory does not grow with
// every distinct count and pid list.
const maxSaid = 1000

// sayDetails writes each detail not said yet in this run, and returns the
// ones said.
func sayDetails(w io.Writer, details []string, said map[string]bool) map[string]bool {
	if said == nil || len(said) > maxSaid {
		said = map[string]bool{}
	}
	for _, d := range details {
		if !said[d] {
			said[d] = true
			fmt.Fprintf(w, "kdiag watch: note: %s\n", d)
		}
	}
	return said
}

// writeReport writes the report to path atomically (temp file, rename), in
// the format its extension says.
func writeReport(path, origin string, a *analyzer.Analysis, notes []string) error {
	format := "html"
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".md" || ext == ".markdown" {
		format = "markdown"
	}
	var buf bytes.Buffer
	if err := report.Formats[format](&buf, report.Input{Origin: origin, Analysis: a, Notes: notes}); err != nil {
		return err
	}
	// 0600 (less the umask), or the mode of the report it replaces: it
	// holds command lines, process names and endpoints.
	if err := atomicfile.Write(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// liveView draws one scan: on a terminal a table redrawn in place, else one
// plain line per scan.
type liveView struct {
	io       *cmdutil.IOStreams
	interval time.Duration
	lines    int // lines drawn last time, to move back over
	n        int
}

// maxRows bounds the live table; the findings at exit cover everything.
const maxRows = 15

func (v *liveView) draw(s *netstat.Snapshot, a *analyzer.Analysis, dur time.Duration) {
	v.n++
	if !v.io.IsStdoutTTY() {
		fmt.Fprintln(v.io.Out, plainLine(s, a, dur))
		return
	}
	var buf bytes.Buffer
	if v.lines > 0 {
		// Cursor up over the last table, then clear to the end of screen.
		fmt.Fprintf(&buf, "\x1b[%dA\x1b[J", v.lines)
	}
	var tb bytes.Buffer
	fmt.Fprintf(&tb, "kdiag watch  %s  every %s  scan %s  sample %d  (Ctrl-C: stop and diagnose)\n",
		s.Time.Format("15:04:05"), v.interval, scanLabel(s, dur), v.n)
	tw := tabwriter.NewWriter(&tb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tPROCESS\tCLOSE_WAIT\tHELD-CLOSE\tESTABLISHED\tOTHER\tRATE/MIN\tVERDICT\tOLDEST\tTOP REMOTE")
	for i, p := range a.Processes {
		if i == maxRows {
			fmt.Fprintf(tw, "…\t%d more\t\t\t\t\t\t\t\t\n", len(a.Processes)-maxRows)
			break
		}
		cw, held, es, other := lastCounts(p)
		oldest := "-"
		if _, age, ok := p.Oldest(a); ok {
			oldest = age.String()
		}
		top := "-"
		if len(p.Remotes) > 0 {
			top = p.Remotes[0].Name()
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%+.1f\t%s\t%s\t%s\n", p.Key.PID, p.Name(), cw, held, es, other,
			p.CloseWaitRecent.PerMinute, p.CloseWait.Verdict, oldest, top)
	}
	tw.Flush()
	v.lines = bytes.Count(tb.Bytes(), []byte("\n"))
	buf.Write(tb.Bytes())
	v.io.Out.Write(buf.Bytes())
}

// lastCounts are p's sockets at the last sample: CLOSE_WAIT, held CLOSE
// (the HELD-CLOSE column, as scan's table names it: fds of sockets in no
// kernel table, not an "other" state), ESTABLISHED, and the rest.
func lastCounts(p analyzer.ProcessSeries) (cw, held, es, other int) {
	cw, held, es = p.Last.Get(netstat.CloseWait), p.Last.Get(netstat.Close), p.Last.Get(netstat.Established)
	return cw, held, es, p.Last.Total() - cw - held - es
}

// scanLabel is how long the scan took, or "served" for one that served
// the last dump again (--events: nothing changed state), which takes no
// time worth a figure.
func scanLabel(s *netstat.Snapshot, dur time.Duration) string {
	if s.Unchanged {
		return "served"
	}
	return dur.Round(time.Millisecond).String()
}

// plainLine is one scan as one line of key=value fields, for logs and pipes:
// the totals, then the three processes with the most CLOSE_WAIT.
func plainLine(s *netstat.Snapshot, a *analyzer.Analysis, dur time.Duration) string {
	var cw, held, es int
	for i := range s.Sockets {
		switch s.Sockets[i].State {
		case netstat.CloseWait:
			cw++
		case netstat.Close:
			held++
		case netstat.Established:
			es++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s sockets=%d close_wait=%d%s established=%d processes=%d scan=%s",
		s.Time.UTC().Format(time.RFC3339), len(s.Sockets), cw, heldField(held), es, len(s.Processes), scanLabel(s, dur))
	shown := 0
	for _, p := range a.Processes {
		if shown == 3 {
			break
		}
		pcw, pheld, pes, _ := lastCounts(p)
		if pcw == 0 && pheld == 0 && pes == 0 {
			continue
		}
		shown++
		fmt.Fprintf(&b, " | %s[%d] close_wait=%d%s established=%d rate=%+.1f/min verdict=%s", p.Name(), p.Key.PID, pcw, heldField(pheld), pes,
			p.CloseWaitRecent.PerMinute, p.CloseWait.Verdict)
		if _, age, ok := p.Oldest(a); ok {
			fmt.Fprintf(&b, " oldest=%s", age.String())
		}
	}
	return b.String()
}

// heldField is a plain line's held CLOSE count, " held_close=N", or
// nothing when there is none (the queries without CLOSE never have one).
func heldField(n int) string {
	if n == 0 {
		return ""
	}
	return " held_close=" + strconv.Itoa(n)
}
