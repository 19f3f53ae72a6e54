// `kdiag repro -- CMD`: the user's own program against the embedded
// idle-closing cluster. RunCommand starts the cluster, runs CMD with the
// bootstrap list, follows it and every process it starts, drives the
// broker's idle closes, and records, close by close, what the program did.

package repro

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/internal/redact"
	"github.com/kdiag/kdiag/netstat"
	"golang.org/x/sys/unix"
)

// How the broker's idle closes come in a RunCommand run
// (CommandOptions.Closes).
const (
	// ClosesDriven: every BrokerIdle from the first connection, kdiag
	// closes every connection that waits for nothing from the broker (no
	// request being read or answered: Cluster.CloseIdle), as the broker's
	// idle close. A client meets the close at known times, however busy it
	// is between them, and nothing races a timer.
	ClosesDriven = "driven"
	// ClosesIdle: the brokers close a connection once it has carried
	// nothing for BrokerIdle, as a real broker does with
	// connections.max.idle.ms; a client busier than that is never closed,
	// and one whose own idle timeout is shorter closes first.
	ClosesIdle = "idle"
)

// BootstrapVar is the environment variable that carries the bootstrap list
// to CMD; {bootstrap} in its arguments is replaced by it too.
const (
	BootstrapVar         = "KAFKA_BOOTSTRAP_SERVERS"
	BootstrapPlaceholder = "{bootstrap}"
)

// Defaults of CommandOptions.
const (
	DefaultCommandDuration = 30 * time.Second
	DefaultConnectTimeout  = time.Minute
	// stderrLines is how many of CMD's last stderr lines are kept for
	// the report and for an early exit's message.
	stderrLines = 10
)

// CommandOptions configure RunCommand.
type CommandOptions struct {
	// Command is CMD and its arguments; every {bootstrap} in them becomes
	// the bootstrap list.
	Command []string
	// BootstrapEnv names more environment variables to set to the
	// bootstrap list, besides KAFKA_BOOTSTRAP_SERVERS.
	BootstrapEnv []string
	// Env is CMD's environment before those (nil: kdiag's own).
	Env []string
	// Brokers is the cluster's size (default 3); Topic is created at
	// start (default kdiag-repro; others are created on first use).
	Brokers int
	Topic   string
	// BrokerIdle is the broker's idle timeout: the time between driven
	// closes, or the brokers' own timer (Closes).
	BrokerIdle time.Duration
	// Closes is ClosesDriven (the default) or ClosesIdle.
	Closes string
	// Duration is how long the run watches after CMD's first connection
	// to the brokers (default DefaultCommandDuration); ConnectTimeout how
	// long it waits for that connection (default DefaultConnectTimeout).
	Duration       time.Duration
	ConnectTimeout time.Duration
	// MaxHold is how long the client may hold a socket the broker closed
	// (CLOSE_WAIT, then CLOSE) before the run calls it held (default
	// BrokerIdle).
	MaxHold time.Duration
	// SampleInterval is the time between samples (default 200ms).
	SampleInterval time.Duration
	// ProcRoot is /proc.
	ProcRoot string
	// Scanner reads the sockets (default netstat.NewScanner(ProcRoot)).
	Scanner *netstat.Scanner
	// Identify names a process's client library (default
	// clients.Identify under ProcRoot).
	Identify func(pid int) (clients.Client, error)
	// Output, when set, gets CMD's standard output and error as they come
	// (kdiag repro --verbose); either way the last lines of its stderr
	// are kept.
	Output io.Writer
	// Logger receives the broker's log (nil discards it).
	Logger *slog.Logger
	// Progress, when set, gets every sample as it is taken.
	Progress func(Sample)
	// NetNS and FinTimeout say the run is in a private network namespace
	// whose net.ipv4.tcp_fin_timeout is FinTimeout (kdiag repro --netns
	// arranges both); they are reported, not acted on.
	NetNS      bool
	FinTimeout time.Duration
	// StopGrace is how long CMD's processes have after SIGTERM before
	// SIGKILL (default StopGrace).
	StopGrace time.Duration
}

// FirstHeldClose returns the connection that keepalive's reset turned
// into a held CLOSE first (the earliest HeldCloseAtMS), nil when none did.
func (r *CommandResult) FirstHeldClose() *Conn {
	var first *Conn
	for _, c := range r.Connections {
		if c.Outcome == OutcomeHeldClose && (first == nil || c.HeldCloseAtMS < first.HeldCloseAtMS) {
			first = c
		}
	}
	return first
}

func (o CommandOptions) withDefaults() CommandOptions {
	if o.Brokers <= 0 {
		o.Brokers = 3
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.BrokerIdle <= 0 {
		o.BrokerIdle = RealBrokerIdle / DefaultScale
	}
	if o.Closes == "" {
		o.Closes = ClosesDriven
	}
	if o.Duration <= 0 {
		o.Duration = DefaultCommandDuration
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxHold <= 0 {
		o.MaxHold = o.BrokerIdle
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Scanner == nil {
		o.Scanner = netstat.NewScanner(o.ProcRoot)
	}
	if o.Identify == nil {
		root := o.ProcRoot
		o.Identify = func(pid int) (clients.Client, error) { return clients.Identify(root, pid) }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StopGrace <= 0 {
		o.StopGrace = StopGrace
	}
	return o
}

// ExitInfo is how CMD ended.
type ExitInfo struct {
	// Status is as Go says it: "exit status 2", "signal: killed".
	Status string `json:"status"`
	Code   int    `json:"code"`
	AtMS   int64  `json:"at_ms"`
	// ByKdiag says kdiag stopped it at the end of the run.
	ByKdiag bool `json:"by_kdiag"`
}

// Round is one driven close: when, and how many connections it closed.
type Round struct {
	AtMS   int64 `json:"at_ms"`
	Closed int   `json:"closed"`
}

// CommandResult is what a RunCommand run saw. Times are milliseconds since
// CMD started.
type CommandResult struct {
	// RunID is this run's MarkerVar value: every process started from CMD
	// has MarkerVar=RunID in its environment (unless it cleared it), which
	// is how a test or a user finds one left behind.
	RunID string `json:"run_id"`
	// Command is CMD as run ({bootstrap} replaced), secrets masked.
	Command      []string  `json:"command"`
	Bootstrap    string    `json:"bootstrap"`
	BootstrapEnv []string  `json:"bootstrap_env"`
	Brokers      []string  `json:"brokers"`
	Topic        string    `json:"topic"`
	BrokerIdleMS int64     `json:"broker_idle_ms"`
	Closes       string    `json:"closes"`
	MaxHoldMS    int64     `json:"max_hold_ms"`
	DurationMS   int64     `json:"duration_ms"`
	SampleMS     int64     `json:"sample_interval_ms"`
	NetNS        bool      `json:"netns"`
	FinTimeoutS  int       `json:"tcp_fin_timeout_s,omitempty"`
	Kernel       string    `json:"kernel"`
	Started      time.Time `json:"started"`

	// Client is the library of the process that held the most
	// connections (ClientPID), as kdiag doctor identifies it.
	Client    clients.Client `json:"client"`
	ClientPID int            `json:"client_pid,omitempty"`
	Processes []Proc         `json:"processes"`

	// FirstConnectMS is CMD's first connection to the brokers, -1 never.
	FirstConnectMS int64    `json:"first_connect_ms"`
	Rounds         []Round  `json:"rounds,omitempty"`
	Connections    []*Conn  `json:"connections"`
	Series         []Sample `json:"series"`
	// OtherRemotes are endpoints other than the brokers CMD connected to.
	OtherRemotes []string `json:"other_remotes,omitempty"`
	// Threads is what the client's network threads were doing while it
	// held sockets the broker had closed (clients.Classify), nil when it
	// held none or names no threads.
	Threads *clients.Threads `json:"threads,omitempty"`
	// Grew says the connections held grew over the run: from
	// ConnectionsFrom (the first third's most) to ConnectionsTo (the end).
	Grew            bool `json:"connections_grew"`
	ConnectionsFrom int  `json:"connections_from"`
	ConnectionsTo   int  `json:"connections_to"`

	Exit       *ExitInfo `json:"exit,omitempty"`
	StderrTail []string  `json:"stderr_tail,omitempty"`
	// Left are processes of CMD's that were still there after SIGKILL.
	Left        []int    `json:"left_running,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"`
	Notes       []string `json:"notes,omitempty"`

	// Status is OK, HELD or UNKNOWN; Verdict the one line that says why;
	// ExitCode 0, 1 or 3 (cmdutil's codes); Fix and Ends the client's
	// own, from the catalog, when it held.
	Status   string `json:"status"`
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exit_code"`
	Fix      string `json:"fix,omitempty"`
	Ends     string `json:"ends,omitempty"`

	// Excerpt is the sockets of the sample where the most were held, as
	// ss -tanpo lists them: the moment the report quotes.
	Excerpt []string `json:"excerpt,omitempty"`
	// Snapshots are the samples whole, for the HTML report (not in the
	// JSON: Series and Connections say it).
	Snapshots []netstat.Snapshot `json:"-"`
}

// ErrCommandStart is what RunCommand returns when CMD could not be started
// at all (no such file, not executable): the user's to fix.
var ErrCommandStart = errors.New("cannot start the command")

// RunCommand runs CMD against the embedded cluster and follows it for
// Duration after its first connection (or until it and its processes are
// gone, or ctx ends), then stops every process it started and the cluster.
// An error means the run could not start; what CMD did, an early exit
// included, is in the result.
func RunCommand(ctx context.Context, o CommandOptions) (*CommandResult, error) {
	o = o.withDefaults()
	if len(o.Command) == 0 {
		return nil, errors.New("repro: no command to run")
	}
	log := newBrokerLog(o.Logger.Handler())
	idle := time.Duration(0)
	if o.Closes == ClosesIdle {
		idle = o.BrokerIdle
	}
	cluster, err := broker.Start(context.WithoutCancel(ctx), broker.Config{Brokers: o.Brokers, Ports: make([]int, o.Brokers),
		Idle: idle, Topics: []string{o.Topic}, Logger: slog.New(log)})
	if err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	defer cluster.Close()
	bootstrap := cluster.BootstrapServers()
	res := &CommandResult{Bootstrap: bootstrap, BootstrapEnv: append([]string{BootstrapVar}, o.BootstrapEnv...),
		Brokers: cluster.Addrs(), Topic: o.Topic, BrokerIdleMS: o.BrokerIdle.Milliseconds(), Closes: o.Closes,
		MaxHoldMS: o.MaxHold.Milliseconds(), DurationMS: o.Duration.Milliseconds(), SampleMS: o.SampleInterval.Milliseconds(),
		NetNS: o.NetNS, FinTimeoutS: int(o.FinTimeout / time.Second), Kernel: kernelRelease(), FirstConnectMS: -1}

	args := make([]string, len(o.Command))
	for i, a := range o.Command {
		args[i] = strings.ReplaceAll(a, BootstrapPlaceholder, bootstrap)
	}
	res.Command = redact.Args(args)
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	res.RunID = runToken()
	marker := MarkerVar + "=" + res.RunID
	env = append(append([]string(nil), env...), marker)
	for _, name := range res.BootstrapEnv {
		env = append(env, name+"="+bootstrap)
	}
	run, err := startCommand(args, env, o.Output)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrCommandStart, args[0], err)
	}
	res.Started = run.started
	tr := newTree(o.ProcRoot, run.pid, marker, run.started)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		res.Left = tr.stop(run.pid, o.StopGrace)
	}
	defer stop() // also on panic: never leave CMD's processes behind

	w := &watch{o: o, res: res, cluster: cluster, log: log, run: run, tree: tr,
		tl: newTimeline(run.started, cluster.Addrs()), identified: map[int]clients.Client{}}
	w.loop(ctx)
	w.stopMS = time.Since(run.started).Milliseconds()
	stop()
	cluster.Close()
	w.tl.events(log.snapshot())
	w.finish()
	return res, nil
}

// runToken is a value for MarkerVar that no other run shares.
func runToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// command is CMD running.
type command struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	done    chan struct{}
	waitErr error
	exitAt  time.Time
	stderr  *lineTail
}

// startCommand starts CMD in a process group of its own, with a
// parent-death signal (Linux), its stdin empty, its output kept (the last
// stderr lines) and relayed to out when set.
func startCommand(args, env []string, out io.Writer) (*command, error) {
	c := &command{done: make(chan struct{}), stderr: &lineTail{max: stderrLines, relay: out}}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stderr = c.stderr
	cmd.Stdout = io.Discard
	if out != nil {
		cmd.Stdout = &lockedWriter{w: out}
	}
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.cmd, c.pid, c.started = cmd, cmd.Process.Pid, time.Now()
	go func() {
		c.waitErr = cmd.Wait()
		c.exitAt = time.Now()
		close(c.done)
	}()
	return c, nil
}

func (c *command) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// lineTail keeps the last max lines written to it, and relays every write.
type lineTail struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial []byte
	relay   io.Writer
}

func (t *lineTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.relay != nil {
		relayMu.Lock()
		_, _ = t.relay.Write(p)
		relayMu.Unlock()
	}
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, redact.Line(strings.TrimRight(string(t.partial[:i]), "\r")))
		t.partial = t.partial[i+1:]
		if len(t.lines) > t.max {
			t.lines = t.lines[1:]
		}
	}
	return len(p), nil
}

// Lines returns the kept lines, the unfinished last one included.
func (t *lineTail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if len(t.partial) > 0 {
		out = append(out, redact.Line(string(t.partial)))
	}
	if len(out) > t.max {
		out = out[len(out)-t.max:]
	}
	return out
}

// lockedWriter relays CMD's standard output; relayMu serializes it with
// the stderr relay of lineTail.
type lockedWriter struct{ w io.Writer }

var relayMu sync.Mutex

func (l *lockedWriter) Write(p []byte) (int, error) {
	relayMu.Lock()
	defer relayMu.Unlock()
	return l.w.Write(p)
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
