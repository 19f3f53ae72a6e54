// Package scan implements `kdiag scan`: one snapshot of the host's TCP
// sockets, attributed to processes, with the Kafka clients marked, as a
// table, a socket list or JSON, and optionally as a monitoring check.
package scan

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/atomicfile"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/netstat"
	"github.com/spf13/cobra"
)

// ScanOptions are the parsed flags of `kdiag scan` and its dependencies.
type ScanOptions struct {
	IO  *cmdutil.IOStreams
	Now func() time.Time
	// ProcRoot is the proc filesystem read (the hidden --proc-root flag).
	ProcRoot string
	// Scan takes the snapshot: a netstat.Scanner's Scan unless a test gives
	// a fixed snapshot.
	Scan func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error)
	// HostNetNS is kdiag's own network namespace, shown as "host"; 0 when
	// unknown.
	HostNetNS uint64

	// Filters are the socket filter flags, shared with kdiag watch.
	cmdutil.Filters
	Output string
	// Warn and Crit are the CLOSE_WAIT-per-process thresholds; -1 is off.
	Warn, Crit int
	// Verbose (-v) also says the snapshot's details: sockets closed and
	// processes exited while the scan ran (netstat.Snapshot.Details).
	Verbose bool

	// CPUProfile, when set (hidden --cpuprofile), is where the scan's CPU
	// profile is written, for the benchmarks in BENCHMARKS.md.
	CPUProfile string
	// MemProfile, when set (hidden --memprofile), is where a profile of
	// every allocation the scan makes is written, for the same purpose.
	MemProfile string
	// Phases (hidden --phases) prints to stderr, as the scan goes, the
	// time at the end of each of its stages since this package's init (most
	// of the others' are before it).
	Phases bool

	// Query is built from the flags before the run.
	Query netstat.Query
}

// NewCmdScan returns `kdiag scan`. runF, when non-nil, replaces runScan
// (flag tests capture the options with it).
func NewCmdScan(f *cmdutil.Factory, runF func(*ScanOptions) error) *cobra.Command {
	opts := &ScanOptions{IO: f.IO, Now: f.Now, Warn: -1, Crit: -1}
	cmd := &cobra.Command{
		Use:   "scan [flags]",
		Short: "List TCP sockets by process, with CLOSE_WAIT ages and Kafka clients marked",
		Long: `Scan takes one snapshot of the TCP sockets of every process on the host, network
namespaces (containers) included when run as root, and attributes each socket to
the process and file descriptor that hold it.

The kernel filters by state (a NETLINK_SOCK_DIAG dump; /proc/net/tcp when netlink
is unavailable), and only the processes the filters leave are read, so
"kdiag scan --state close-wait" on a host with many sockets costs little.

Kafka clients are marked: a JVM with kafka-clients on its class path, a process
that maps librdkafka, or one with sockets to --brokers (by default to ports
9092-9094). For CLOSE_WAIT, Recv-Q 1 means the peer's FIN was never read, 0 that
it was read but the socket never closed, more that data was left unread too.

CLOSE (the HELD-CLOSE column) is what ss cannot show: TCP sockets the kernel
dropped from its tables (a keepalive probe after a CLOSE_WAIT got the peer's
RST) whose fds the process still holds: the same leak one stage later. They
are found by reading every fd of the processes, so only --state all (the
default) or a list with close lists them; --state close-wait says on stderr how
many it left out (read from the pass over the socket fds it makes as root, where
each socket's state comes with it). Their addresses are unknown to a single
scan ("-"); kdiag watch keeps the ones they had in CLOSE_WAIT.

Held CLOSE counts as a leak wherever CLOSE_WAIT does: --port, --remote and
--brokers, which cannot match a held socket of unknown address, keep those of
the processes they select, marked "*": a process that holds a socket the
filters match, in any state (an ESTABLISHED connection to a broker will do),
or, with --brokers, a Kafka client by its own files (kafka-clients, librdkafka).
kdiag watch also keeps selecting a process that held such a socket before.

With --warn or --crit scan is a monitoring check (the Nagios plugin convention):
a one-line summary first, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, on the
largest count of CLOSE_WAIT plus held CLOSE sockets of one process ("more than
N"). UNKNOWN also when sockets kdiag could not attribute could change it.

A --pid that names no process makes the result UNKNOWN (exit 3), check or not.

A broker host's view: --listen-ports 9092 keeps the sockets whose local port is
9092, the broker's side of its clients' connections, and the table has a row
per client address: ESTABLISHED (connections it keeps), FIN-WAIT-2 (closed by
the broker, not yet by the client: its side is in CLOSE_WAIT), CLOSE-WAIT
(closed by the client, not by the broker), TIME-WAIT, and the broker address
it connects to. --by-client --process kafka takes the ports the kafka
processes listen on. Without --state it leaves held CLOSE out (no client to
count them under). -o json writes the same per client; -o wide the sockets.
See docs/scan.md for reading it beside kdiag on the client hosts.

Notes about what could not be seen (other users' processes when not root, a
namespace kdiag could not enter) go to stderr, once; what a busy host makes of
every scan (sockets closed and processes exited while it ran) only with -v.`,
		Example: `  # every socket, one row per process
  kdiag scan

  # the leaked sockets toward a Kafka cluster (CLOSE_WAIT and held CLOSE), one line per socket
  kdiag scan --state close-wait,close --brokers kafka-1:9092,kafka-2:9092 -o wide

  # a Nagios/Icinga check: WARNING above 100 CLOSE_WAIT plus held CLOSE in one process, CRITICAL above 1000
  kdiag scan --state close-wait,close --warn 100 --crit 1000

  # the sockets of java processes, as JSON
  kdiag scan --process java -o json

  # on a broker host: its clients' connections by client address
  kdiag scan --listen-ports 9092,9093
  kdiag scan --by-client --process kafka`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProcRoot = f.ProcRoot
			opts.Filters.StatesGiven = cmd.Flags().Changed("state")
			if err := opts.complete(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runScan(opts)
		},
	}
	fl := cmd.Flags()
	cmdutil.AddFilterFlags(fl, &opts.Filters)
	cmdutil.FormatFlag(fl, &opts.Output, "table", cmdutil.Keys(formats))
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "also note what a busy host makes of every scan: sockets closed and processes exited while it ran")
	fl.IntVar(&opts.Warn, "warn", -1, "monitoring: WARNING (exit 1) when a process has more than N CLOSE_WAIT (plus held CLOSE) sockets")
	fl.IntVar(&opts.Crit, "crit", -1, "monitoring: CRITICAL (exit 2) when a process has more than N CLOSE_WAIT (plus held CLOSE) sockets")
	fl.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the scan to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.StringVar(&opts.MemProfile, "memprofile", "", "write a profile of the scan's allocations to this file")
	_ = fl.MarkHidden("memprofile")
	fl.BoolVar(&opts.Phases, "phases", false, "print the time since start at the end of each stage of the scan to stderr")
	_ = fl.MarkHidden("phases")
	return cmd
}

// complete checks the flags and builds the query; every error is the user's
// to fix, so it is a usage error (exit 2).
func (o *ScanOptions) complete() error {
	if err := cmdutil.CheckFormat(o.Output, cmdutil.Keys(formats)); err != nil {
		return err
	}
	q, err := o.Filters.Query()
	if err != nil {
		return err
	}
	if err := CheckThresholds(o.Warn, o.Crit); err != nil {
		return err
	}
	o.Query = q
	return nil
}

// phase prints, with --phases, the time since processStart, the resident
// memory so far (peak, then now: anonymous and file-backed, from
// /proc/self/status) and name: where a scan's peak RSS is made.
func (o *ScanOptions) phase(name string) {
	if o.Phases {
		fmt.Fprintf(o.IO.ErrOut, "kdiag: phase %8.2f ms %s  %s\n", float64(time.Since(processStart).Microseconds())/1000, residentKB(), name)
	}
}

// residentKB returns VmHWM, RssAnon and RssFile from /proc/self/status
// as "hwm N anon N file N" in KB; what it cannot read is left out.
func residentKB() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range [][2]string{{"VmHWM:", "hwm"}, {"RssAnon:", "anon"}, {"RssFile:", "file"}} {
			if v, ok := strings.CutPrefix(line, f[0]); ok {
				out = append(out, f[1]+" "+strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			}
		}
	}
	return strings.Join(out, " ")
}

// scanGCPercent is a one-shot scan's GOGC, unless the environment sets one.
const scanGCPercent = 400

// processStart is when this package was initialized.
var processStart = time.Now()

// monitoring reports whether --warn or --crit was given.
func (o *ScanOptions) monitoring() bool { return o.Warn >= 0 || o.Crit >= 0 }

func runScan(opts *ScanOptions) error {
	// No soft memory limit: 12 MiB was set here once, to keep the heap
	// small, but at 20,000 CLOSE_WAIT it left the JSON scan's peak RSS
	// 0.5 MB higher (18.5 -> 19.0 MB) and made the larger outputs collect
	// without pause (-o wide: 1.2 s -> 3.0 s). See BENCHMARKS.md.
	if opts.CPUProfile != "" {
		f, err := atomicfile.Create(opts.CPUProfile, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if opts.MemProfile != "" {
		f, err := atomicfile.Create(opts.MemProfile, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		// Every allocation, not a sample: a scan makes few enough.
		runtime.MemProfileRate = 1
		defer func() { _ = pprof.Lookup("allocs").WriteTo(f, 0) }()
	}
	listenScan := opts.Scan // the scan that finds --by-client's ports
	if opts.Scan == nil {
		// Collections rarer instead of a limit: a scan keeps most of what
		// it allocates (at case D 15.8 MB allocated for a 12 MB live
		// heap), so the collector at GOGC=100 frees little, and its cycles
		// cost a scan more than they save: their mark bitmaps and work
		// buffers are fresh pages to fault in. At 400 a scan below 16 MB
		// of heap does not collect, and a larger one still collects at
		// five times its live heap. Only the real scan: a test's fake
		// leaves its process's collector alone.
		if _, set := os.LookupEnv("GOGC"); !set {
			debug.SetGCPercent(scanGCPercent)
		}
		s := netstat.NewScanner(opts.ProcRoot)
		s.Source = opts.Source
		s.FDs = opts.FDs
		s.Now = opts.Now
		s.NoCache = true // one scan: nothing to reuse
		// --state close-wait says how many held CLOSE it left out.
		s.CountHeld = true
		// The broker host's view by client shows no age (-o wide and the
		// check's line do).
		s.NoAges = opts.Filters.ClientView() && opts.Output != "wide" && !opts.monitoring()
		// The table has a row a process, whose figures do not depend on
		// the sockets' order (ties broken by address): no sort.
		s.Unordered = opts.Output == "table"
		if opts.Phases {
			s.Phase = func(name string) { opts.phase(name) }
		}
		opts.Scan = s.Scan
		listenScan = func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error) {
			// Listeners only: no note of the held CLOSE sockets left out,
			// which would cost a pass over every socket fd.
			s.CountHeld = false
			defer func() { s.CountHeld = true }()
			return s.Scan(ctx, q)
		}
	}
	opts.phase("scanner ready")
	if opts.HostNetNS == 0 {
		opts.HostNetNS = selfNetNS(opts.ProcRoot)
	}
	write := formats[opts.Output]
	if opts.Filters.ClientView() {
		q, err := ClientQuery(context.Background(), listenScan, opts.Query)
		if err != nil {
			if opts.monitoring() {
				fmt.Fprintf(opts.IO.Out, "KDIAG UNKNOWN - %v\n", err)
				return cmdutil.Exit(cmdutil.ExitUnknown)
			}
			return err
		}
		opts.Query, write = q, clientFormats[opts.Output]
	}
	snap, err := opts.Scan(context.Background(), opts.Query)
	if err != nil {
		if opts.monitoring() {
			fmt.Fprintf(opts.IO.Out, "KDIAG UNKNOWN - scan failed: %v\n", err)
			return cmdutil.Exit(cmdutil.ExitUnknown)
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("scan: %w", err)}
	}
	code := cmdutil.ExitOK
	// A --pid that names no process: the scan cannot say anything of it,
	// so the result is UNKNOWN, said once (the check's line, else after
	// the output), in the words doctor and watch use too.
	missing := snap.MissingError()
	if opts.monitoring() {
		var line string
		code, line = checkLine(snap, opts.Warn, opts.Crit, opts.Now())
		if opts.Output == "json" {
			// The first line of stdout stays JSON; the summary goes to
			// stderr.
			fmt.Fprintln(opts.IO.ErrOut, line)
		} else {
			fmt.Fprintln(opts.IO.Out, line)
		}
	}
	// Notes after the summary, which a monitoring system reads first.
	for _, n := range snap.Notes {
		fmt.Fprintf(opts.IO.ErrOut, "kdiag: note: %s\n", n)
	}
	if opts.Verbose {
		for _, n := range snap.Details {
			fmt.Fprintf(opts.IO.ErrOut, "kdiag: note: %s\n", n)
		}
	}
	if err := write(opts.IO.Out, snap, view{hostNS: opts.HostNetNS, now: opts.Now(), listenPorts: opts.Query.ListenPorts}); err != nil {
		return err
	}
	opts.phase("written")
	if missing != nil && !opts.monitoring() {
		return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: missing}
	}
	if code != cmdutil.ExitOK {
		return cmdutil.Exit(code)
	}
	return nil
}

// selfNetNS reads kdiag's own network namespace, 0 if it cannot.
func selfNetNS(procRoot string) uint64 {
	link, err := os.Readlink(procRoot + "/self/ns/net")
	if err != nil {
		return 0
	}
	s := strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]")
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// checkLine computes the monitoring status on the largest CLOSE_WAIT count of
// one process and writes the one-line summary, perfdata after the "|".
func checkLine(snap *netstat.Snapshot, warn, crit int, now time.Time) (int, string) {
	cwName, heldName := netstat.CloseWait.String(), netstat.Close.String()
	// A held CLOSE socket is a CLOSE_WAIT one a keepalive RST took out of
	// the kernel's tables: the same leak, one stage later, so it counts.
	leaked := func(p *netstat.Process) int { return p.States[cwName] + p.States[heldName] }
	var worst *netstat.Process
	total := 0
	for i := range snap.Processes {
		p := &snap.Processes[i]
		n := leaked(p)
		total += n
		if n > 0 && (worst == nil || n > leaked(worst)) {
			worst = p
		}
	}
	unattributed := 0
	for _, s := range snap.Sockets {
		if s.State == netstat.CloseWait && s.PID == 0 {
			unattributed++
		}
	}
	max := 0
	if worst != nil {
		max = leaked(worst)
	}
	perf := fmt.Sprintf("close_wait=%d;%s;%s close_wait_total=%d", max, thr(warn), thr(crit), total+unattributed)
	if err := snap.MissingError(); err != nil {
		// Nothing can be said of a process that is not there.
		return cmdutil.ExitUnknown, fmt.Sprintf("KDIAG UNKNOWN - %v | %s", err, perf)
	}
	status, code := checkStatus(max, warn, crit)
	// What kdiag could not see could change the verdict when the unseen
	// CLOSE_WAIT, all in the worst process, would cross a threshold it has
	// not: then the check does not know (UNKNOWN), and says why first.
	if u := snap.Unseen; u != nil && u.Sockets[cwName] > 0 {
		n := u.Sockets[cwName]
		if could, _ := checkStatus(max+n, warn, crit); could != status {
			return cmdutil.ExitUnknown, fmt.Sprintf("KDIAG UNKNOWN - %d CLOSE_WAIT unattributed, enough to make it %s: %s | %s", n, could, u.Reason, perf)
		}
	}
	var msg string
	if worst == nil {
		msg = "no CLOSE_WAIT socket in any process"
	} else {
		msg = fmt.Sprintf("%d CLOSE_WAIT", worst.States[cwName])
		if h := worst.States[heldName]; h > 0 {
			msg += fmt.Sprintf(" and %d held CLOSE", h)
		}
		msg += fmt.Sprintf(" in pid %d (%s)", worst.PID, worst.Name)
		if lo, hi, ok := oldestCloseWait(snap.Sockets, worst.PID); ok {
			msg += ", oldest " + ageRange(lo, hi)
		}
	}
	if unattributed > 0 {
		msg += fmt.Sprintf("; %d CLOSE_WAIT unattributed", unattributed)
	}
	return code, fmt.Sprintf("KDIAG %s - %s | %s", status, msg, perf)
}

// checkStatus is the status of a largest count of max CLOSE_WAIT in one
// process: CRITICAL above crit, WARNING above warn (a negative threshold is
// off).
func checkStatus(max, warn, crit int) (string, int) {
	switch {
	case crit >= 0 && max > crit:
		return "CRITICAL", cmdutil.ExitCritical
	case warn >= 0 && max > warn:
		return "WARNING", cmdutil.ExitWarning
	}
	return "OK", cmdutil.ExitOK
}

func thr(n int) string {
	if n < 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// oldestCloseWait bounds the age of pid's oldest CLOSE_WAIT socket: the
// largest lower and upper bounds of the sockets' ages.
func oldestCloseWait(socks []netstat.Socket, pid int) (lo, hi time.Duration, ok bool) {
	for i := range socks {
		s := &socks[i]
		if s.PID == pid && s.State == netstat.CloseWait && s.HasAge {
			lo, hi, ok = max(lo, s.Age), max(hi, s.AgeMax()), true
		}
	}
	return lo, hi, ok
}

// CheckThresholds checks --warn and --crit (-1: not given), as scan and
// watch take them: a usage error for a negative count, or a WARNING
// threshold above the CRITICAL one.
func CheckThresholds(warn, crit int) error {
	if warn < -1 || crit < -1 {
		return cmdutil.UsageErrorf("--warn and --crit take a count of sockets (0 or more)")
	}
	if warn >= 0 && crit >= 0 && warn > crit {
		return cmdutil.UsageErrorf("--warn %d is above --crit %d: WARNING must come first", warn, crit)
	}
	return nil
}

// Check is the monitoring check of --warn and --crit (-1: off) on snap:
// the exit code (cmdutil.ExitOK, ExitWarning, ExitCritical or ExitUnknown,
// the Nagios convention) and the one-line summary, perfdata after the "|".
// kdiag watch --warn/--crit give it for their last scan.
func Check(snap *netstat.Snapshot, warn, crit int) (int, string) {
	return checkLine(snap, warn, crit, snap.Time)
}
