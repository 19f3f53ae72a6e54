package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/producer"
)

// Defaults of Options.
const (
	// DefaultScale divides the real timers: 10m broker idle / 200 = 3s.
	DefaultScale = 200
	// DefaultSampleInterval is how often the child's sockets are read.
	DefaultSampleInterval = 200 * time.Millisecond
	// DefaultTopic is the topic the producer writes to.
	DefaultTopic = "kdiag-repro"
	// StopGrace is how long the child has to close after SIGTERM before it
	// is killed (a blocked callback ends with the signal, so Close does not
	// wait for it).
	StopGrace = 5 * time.Second
)

// SocketSource returns the TCP sockets process pid holds.
type SocketSource func(ctx context.Context, pid int) ([]netstat.Socket, error)

// clientStates are the states a client's connections can be in while the
// client holds them; the kernel filters on them, which matters on a host with
// many sockets (TIME_WAIT and listeners are not the producer's).
var clientStates = netstat.States(netstat.SynSent, netstat.Established, netstat.FinWait1, netstat.FinWait2,
	netstat.Closing, netstat.CloseWait, netstat.LastAck)

// ScannerSource reads a process's sockets through netstat's Scanner: an
// inet_diag dump (with tcp_info, so CLOSE_WAIT ages are the kernel's) or the
// /proc/net/tcp fallback, attributed to the process through its fds.
//
// Calls share scans, because a dump lists every socket of the host and on a
// host with many sockets one dump is what a sample costs: a call waits for
// the next scan to start, and each scan covers every pid asked for by the
// calls waiting when it starts. So scenarios run in parallel cost one dump
// per sample, not one each. It is safe for concurrent use.
func ScannerSource(procRoot string) SocketSource {
	s := &sharedScanner{sc: netstat.NewScanner(procRoot), waiting: map[int][]chan scanResult{}}
	return s.sockets
}

type scanResult struct {
	socks []netstat.Socket
	err   error
}

type sharedScanner struct {
	sc *netstat.Scanner // used by one loop at a time

	mu      sync.Mutex
	waiting map[int][]chan scanResult
	running bool
}

func (s *sharedScanner) sockets(ctx context.Context, pid int) ([]netstat.Socket, error) {
	ch := make(chan scanResult, 1) // the loop never blocks on a caller that left
	s.mu.Lock()
	s.waiting[pid] = append(s.waiting[pid], ch)
	if !s.running {
		s.running = true
		go s.loop()
	}
	s.mu.Unlock()
	select {
	case r := <-ch:
		return r.socks, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// loop scans while calls wait, then ends.
func (s *sharedScanner) loop() {
	for {
		s.mu.Lock()
		batch := s.waiting
		if len(batch) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.waiting = map[int][]chan scanResult{}
		s.mu.Unlock()

		pids := make([]int, 0, len(batch))
		for pid := range batch {
			pids = append(pids, pid)
		}
		snap, err := s.sc.Scan(context.Background(), netstat.Query{States: clientStates, PIDs: pids})
		byPID := map[int][]netstat.Socket{}
		if err == nil {
			for _, so := range snap.Sockets {
				byPID[so.PID] = append(byPID[so.PID], so)
			}
		}
		for pid, chs := range batch {
			for _, ch := range chs {
				ch <- scanResult{socks: byPID[pid], err: err}
			}
		}
	}
}

// ProcSource reads a process's sockets from <procRoot>/<pid>/net/tcp{,6}
// and keeps those whose inode the process holds (netstat's Attributor
// through <procRoot>/<pid>/fd). It is safe for concurrent use.
func ProcSource(procRoot string) SocketSource {
	var mu sync.Mutex
	at := netstat.NewAttributor(procRoot)
	return func(ctx context.Context, pid int) ([]netstat.Socket, error) {
		socks, err := netstat.ReadProcNetTCP(procRoot, pid, clientStates)
		if err != nil && len(socks) == 0 {
			return nil, err
		}
		mu.Lock()
		at.AttributeSockets(ctx, []int{pid}, socks)
		mu.Unlock()
		out := socks[:0]
		for _, s := range socks {
			if s.PID == pid {
				out = append(out, s)
			}
		}
		return out, err
	}
}

// Options configure Run.
type Options struct {
	// Executable is the kdiag binary started as `kdiag produce`.
	Executable string
	// Bootstrap is a real cluster's bootstrap.servers; "" starts the
	// embedded broker for each scenario.
	Bootstrap string
	// BrokerIdle is the broker's connections.max.idle.ms: the embedded
	// broker's idle timeout, or what a real cluster's is. Every scenario
	// timer is scaled by BrokerIdle/10m.
	BrokerIdle time.Duration
	// Duration is how long each scenario runs; 0 means 4 x BrokerIdle. A
	// BlockCallbacks scenario whose stall is not done by then runs on, for
	// up to 2 x BrokerIdle, and a client that reads every connection gets
	// the settle bound (SettleFraction) for its final count.
	Duration time.Duration
	// SampleInterval is the time between socket samples (default 200ms).
	SampleInterval time.Duration
	// Topic is the topic produced to (default kdiag-repro).
	Topic string
	// Brokers is the embedded cluster's size (default 3).
	Brokers int
	// Sockets reads the child's sockets.
	Sockets SocketSource
	// Logger receives the broker's accept/close events and the child's
	// stderr lines (nil discards them).
	Logger *slog.Logger
	// ChildLogLevel is the child's --log-level (default info).
	ChildLogLevel string
}

func (o Options) withDefaults() Options {
	if o.BrokerIdle <= 0 {
		o.BrokerIdle = RealBrokerIdle / DefaultScale
	}
	if o.Duration <= 0 {
		o.Duration = 4 * o.BrokerIdle
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Brokers <= 0 {
		o.Brokers = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ChildLogLevel == "" {
		o.ChildLogLevel = "info"
	}
	return o
}

// Sample is one reading of the child's sockets.
type Sample struct {
	// Elapsed is the time since the child started.
	Elapsed     time.Duration `json:"-"`
	ElapsedMS   int64         `json:"t_ms"`
	Established int           `json:"established"`
	CloseWait   int           `json:"close_wait"`
	// Other counts the sockets in any other state (SYN_SENT, FIN_WAIT...,
	// TIME_WAIT is not held by the process and not seen).
	Other int `json:"other"`
	// HeldClose counts the sockets seen in CLOSE whose file descriptor
	// the client still holds after keepalive reset the connection (kdiag
	// repro -- CMD follows them; the scenarios do not).
	HeldClose int `json:"close,omitempty"`
	// OldestCloseWait is the age of the oldest socket now in CLOSE_WAIT.
	OldestCloseWait time.Duration `json:"-"`
}

// Result is what one scenario run showed. Its times are at the run's scale
// (Scale): what the run took, not what they stand for at real scale.
type Result struct {
	Name string `json:"name"`
	// Shows is Scenario.Describe at the run's scale.
	Shows string `json:"shows"`
	// StandsFor is Scenario.StandsFor: the real clients the run stands for.
	StandsFor string `json:"stands_for"`
	// Scale is 10m / BrokerIdle: what the real timers were divided by.
	Scale float64 `json:"scale"`
	// Config is the producer settings (--set) the child ran with.
	Config             map[string]string `json:"config"`
	Reader             string            `json:"reader"`
	ProducerPerMessage bool              `json:"producer_per_message"`
	IntervalMS         int64             `json:"interval_ms"`
	// BlockCallbacks: the producer's callbacks blocked until the run
	// released them, CallbacksReleasedMS after the start (0: never).
	BlockCallbacks      bool   `json:"block_callbacks,omitempty"`
	CallbacksReleasedMS int64  `json:"callbacks_released_ms,omitempty"`
	BrokerIdleMS        int64  `json:"broker_idle_ms"`
	DurationMS          int64  `json:"duration_ms"`
	Bootstrap           string `json:"bootstrap"`
	Embedded            bool   `json:"embedded_broker"`
	ChildPID            int    `json:"child_pid"`

	EstablishedPeak  int `json:"established_peak"`
	EstablishedFinal int `json:"established_final"`
	CloseWaitPeak    int `json:"close_wait_peak"`
	// CloseWaitFinal is the CLOSE_WAIT count of the last sample. For a
	// client that reads every connection (and is not stalled) the run
	// samples on past Duration, within the settle bound (SettleFraction),
	// while the last sample shows CLOSE_WAIT: a socket the broker closed
	// just then is closed by such a client at once, and only one it keeps
	// counts.
	CloseWaitFinal int `json:"close_wait_final"`
	// CloseWaitOldestMS is the longest any socket was seen in CLOSE_WAIT.
	CloseWaitOldestMS int64 `json:"close_wait_oldest_ms"`
	// CloseWaitTotal counts the distinct sockets ever seen in CLOSE_WAIT.
	CloseWaitTotal int `json:"close_wait_total"`
	// CloseWaitFinalByRemote counts the final sample's CLOSE_WAIT sockets by
	// the broker address they were connected to.
	CloseWaitFinalByRemote map[string]int `json:"close_wait_final_by_remote"`

	// Client is the child's own count (--stats-json), nil if it gave none.
	Client *producer.Stats `json:"client"`
	// Broker is the embedded broker's count, nil for a real cluster.
	Broker *broker.Stats `json:"broker"`

	Expected   string   `json:"expected"`
	AsExpected bool     `json:"as_expected"`
	Verdict    string   `json:"verdict"`
	Series     []Sample `json:"series"`
	// Notes are what limited the run (sampling errors, the child's exit).
	Notes []string `json:"notes,omitempty"`
	// Interrupted is set when the run was stopped before Duration.
	Interrupted bool `json:"interrupted,omitempty"`
	// ProducerExited says how the producer ended when it exited before the
	// end of the run (a bad flag, an unreachable cluster...).
	ProducerExited string `json:"producer_exited,omitempty"`
}

// Run runs one scenario: it starts the embedded broker (unless
// opts.Bootstrap names a real cluster), starts `kdiag produce` as a child in
// its own process group, samples the child's sockets until opts.Duration or
// ctx ends, then stops the child (SIGTERM, SIGKILL after StopGrace) and the
// broker. progress, if non-nil, gets every sample as it is taken.
//
// An error means the scenario could not run (the broker or the child did not
// start); what the run showed, including a child that died, is in Result.
func Run(ctx context.Context, sc Scenario, opts Options, progress func(Sample)) (*Result, error) {
	opts = opts.withDefaults()
	if opts.Executable == "" {
		return nil, errors.New("repro: no kdiag executable to run the producer with")
	}
	if opts.Sockets == nil {
		return nil, errors.New("repro: no socket source")
	}
	b := opts.BrokerIdle
	res := &Result{
		Name:               sc.Name,
		Shows:              sc.Describe(b),
		StandsFor:          sc.StandsFor,
		Scale:              float64(RealBrokerIdle) / float64(b),
		Config:             sc.Settings(b),
		Reader:             sc.Reader,
		ProducerPerMessage: sc.ProducerPerMessage,
		IntervalMS:         Scale(sc.Interval, b).Milliseconds(),
		BlockCallbacks:     sc.BlockCallbacks,
		BrokerIdleMS:       b.Milliseconds(),
		DurationMS:         opts.Duration.Milliseconds(),
		Expected:           sc.Expect.String(),
	}

	var cluster *broker.Cluster
	bootstrap := opts.Bootstrap
	if bootstrap == "" {
		c, err := broker.Start(context.WithoutCancel(ctx), broker.Config{
			Brokers: opts.Brokers,
			// Free ports, so that a scenario never meets a broker (or a
			// `kdiag broker`) already on 9092.
			Ports:  make([]int, opts.Brokers),
			Idle:   b,
			Topics: []string{opts.Topic},
			Logger: opts.Logger.With("scenario", sc.Name),
		})
		if err != nil {
			return nil, fmt.Errorf("repro: %s: %w", sc.Name, err)
		}
		defer c.Close()
		cluster, bootstrap = c, c.BootstrapServers()
		res.Embedded = true
	}
	res.Bootstrap = bootstrap

	child, err := startChild(sc, opts, bootstrap, res.Config)
	if err != nil {
		return nil, fmt.Errorf("repro: %s: %w", sc.Name, err)
	}
	res.ChildPID = child.pid
	defer child.stop() // also on panic: never leave the child behind

	sampleLoop(ctx, sc, child, opts, res, progress)
	if ctx.Err() != nil {
		res.Interrupted = true
	}
	if err := child.stop(); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	if st, err := child.stats(); err != nil {
		res.Notes = append(res.Notes, err.Error())
	} else {
		res.Client = st
	}
	if cluster != nil {
		st := cluster.Stats()
		res.Broker = &st
	}
	judge(sc, res)
	return res, nil
}

// Settle bounds how long a run samples past its Duration for a client that
// reads every connection while its last sample shows CLOSE_WAIT (see
// Result.CloseWaitFinal): the broker idle timeout divided by
// SettleFraction, and at least SettleSamples sample intervals.
const (
	SettleFraction = 2
	SettleSamples  = 5
)

// stall is where a BlockCallbacks run is: the callbacks block until every
// connection is seen in CLOSE_WAIT (stallWaiting), the run holds them so
// for a while (stallHolding), releases them and waits until no CLOSE_WAIT
// is left (stallReleased), and is done (stallDone). Each step waits for
// what the samples show, not for a time, except the hold, which only
// lengthens what is shown.
type stall int

const (
	stallNone stall = iota
	stallWaiting
	stallHolding
	stallReleased
	stallDone
)

// sampleLoop reads the child's sockets every SampleInterval until Duration,
// ctx's end or the child's exit, and fills res's socket figures. A
// BlockCallbacks scenario's stall is driven from here (stall), and the run
// goes on past Duration, for up to two broker idle periods, until it is
// done; a client that reads every connection gets up to the settle bound
// past Duration to close what the broker closed at the last moment.
func sampleLoop(ctx context.Context, sc Scenario, ch *child, opts Options, res *Result, progress func(Sample)) {
	type key struct{ local, remote string }
	firstCW := map[key]time.Time{}
	seenCW := map[key]bool{}
	var oldest time.Duration
	sampleErrs := 0

	deadline := ch.started.Add(opts.Duration)
	hardEnd := deadline.Add(2 * opts.BrokerIdle)
	settleEnd := deadline.Add(max(opts.BrokerIdle/SettleFraction, SettleSamples*opts.SampleInterval))
	// Held long enough that no reader could mistake it for a FIN read at
	// once (AtOnce).
	hold := max(opts.BrokerIdle/3, AtOnce+2*opts.SampleInterval)
	phase := stallNone
	if sc.BlockCallbacks {
		phase = stallWaiting
	}
	var allAt time.Time

	t := time.NewTicker(opts.SampleInterval)
	defer t.Stop()
	for {
		socks, err := opts.Sockets(ctx, ch.pid)
		now := time.Now() // when the reading is complete
		if err != nil && ctx.Err() == nil {
			sampleErrs++
			if sampleErrs == 1 {
				res.Notes = append(res.Notes, "reading the producer's sockets: "+err.Error())
			}
		}
		s := Sample{Elapsed: now.Sub(ch.started)}
		s.ElapsedMS = s.Elapsed.Milliseconds()
		live := map[key]bool{}
		byRemote := map[string]int{}
		for _, so := range socks {
			switch so.State {
			case netstat.Established:
				s.Established++
			case netstat.CloseWait:
				s.CloseWait++
				k := key{so.Local.String(), so.Remote.String()}
				live[k] = true
				seenCW[k] = true
				byRemote[k.remote]++
				if _, ok := firstCW[k]; !ok {
					firstCW[k] = now
				}
				age := now.Sub(firstCW[k])
				if so.HasAge && so.Age > age {
					age = so.Age // netlink knows when the FIN came
				}
				s.OldestCloseWait = max(s.OldestCloseWait, age)
			default:
				s.Other++
			}
		}
		for k := range firstCW {
			if !live[k] {
				delete(firstCW, k)
			}
		}
		oldest = max(oldest, s.OldestCloseWait)
		res.Series = append(res.Series, s)
		res.EstablishedPeak = max(res.EstablishedPeak, s.Established)
		res.CloseWaitPeak = max(res.CloseWaitPeak, s.CloseWait)
		res.EstablishedFinal, res.CloseWaitFinal = s.Established, s.CloseWait
		res.CloseWaitFinalByRemote = byRemote
		if progress != nil {
			progress(s)
		}

		switch phase {
		case stallWaiting:
			// Nothing the stalled producer holds is read, so the broker
			// closes every connection in time: all are in CLOSE_WAIT.
			if err == nil && s.CloseWait > 0 && s.Established == 0 && s.Other == 0 {
				phase, allAt = stallHolding, now
			}
		case stallHolding:
			if now.Sub(allAt) >= hold {
				if err := ch.release(); err != nil {
					res.Notes = append(res.Notes, err.Error())
					phase = stallDone
					break
				}
				res.CallbacksReleasedMS = now.Sub(ch.started).Milliseconds()
				phase = stallReleased
			}
		case stallReleased:
			if err == nil && s.CloseWait == 0 {
				phase = stallDone
			}
		}

		if !now.Before(deadline) {
			stalling := phase != stallNone && phase != stallDone
			reading := sc.Reader == "poll" && !stalling
			if !(stalling && now.Before(hardEnd)) && !(reading && s.CloseWait > 0 && now.Before(settleEnd)) {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-ch.done:
			res.ProducerExited = ch.exitString()
		case <-t.C:
			continue
		}
		break
	}
	switch phase {
	case stallWaiting, stallHolding:
		res.Notes = append(res.Notes, fmt.Sprintf("the broker had not closed every connection of the stalled producer by the end of the run (%s), so its callbacks were not released: run it longer (--duration)",
			human.Age(time.Duration(res.Series[len(res.Series)-1].ElapsedMS)*time.Millisecond)))
	case stallReleased:
		res.Notes = append(res.Notes, "the callbacks were released, but CLOSE_WAIT was still there at the end of the run")
	}
	if n := len(res.Series); n > 1 {
		took := res.Series[n-1].Elapsed - res.Series[0].Elapsed
		if avg := took / time.Duration(n-1); avg > 2*opts.SampleInterval {
			res.Notes = append(res.Notes, fmt.Sprintf("samples came every %s on average, not every %s: reading the host's sockets is slow here (how many TCP sockets does it have?)",
				avg.Round(10*time.Millisecond), opts.SampleInterval))
		}
	}
	if sampleErrs > 1 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d samples could not be read", sampleErrs, len(res.Series)))
	}
	res.CloseWaitOldestMS = oldest.Milliseconds()
	res.CloseWaitTotal = len(seenCW)
}

// child is a running `kdiag produce`.
type child struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	grace   time.Duration // SIGTERM to SIGKILL
	done    chan struct{} // closed when the process has been waited for
	stdout  bytes.Buffer  // --stats-json
	stderr  *tailBuffer
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// startChild starts `kdiag produce` with the scenario's flags in a process
// group of its own, so that stopping it reaches anything it started, and
// with a parent-death signal, so that it dies with kdiag even if kdiag is
// killed.
func startChild(sc Scenario, opts Options, bootstrap string, settings map[string]string) (*child, error) {
	b := opts.BrokerIdle
	args := []string{"produce",
		"--bootstrap-server", bootstrap,
		"--topic", opts.Topic,
		"--messages", "0",
		"--interval", Scale(sc.Interval, b).String(),
		"--reader", sc.Reader,
		// A bound of its own, in case kdiag dies in a way the parent-death
		// signal does not cover: the run ends it long before.
		"--duration", (opts.Duration + time.Minute).String(),
		"--log-level", opts.ChildLogLevel,
		// JSON, so that each line is logged as the producer's own record
		// (relayLine), not nested as text inside a message of ours.
		"--log-format", "json",
		"--stats-json",
	}
	if sc.BlockCallbacks {
		args = append(args, "--block-callbacks")
	}
	if sc.ProducerPerMessage {
		args = append(args, "--producer-per-message")
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--set", k+"="+settings[k])
	}

	ch := &child{grace: StopGrace, done: make(chan struct{}), stderr: newTailBuffer(opts.Logger.With("scenario", sc.Name, "source", "producer"))}
	cmd := exec.Command(opts.Executable, args...)
	cmd.Stdout = &ch.stdout
	cmd.Stderr = ch.stderr
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the producer (%s produce): %w", opts.Executable, err)
	}
	ch.cmd, ch.pid, ch.started = cmd, cmd.Process.Pid, time.Now()
	go func() {
		ch.waitErr = cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

// release ends the block of the child's callbacks (kdiag produce
// --block-callbacks): SIGUSR1, which it handles from its start.
func (c *child) release() error {
	if err := syscall.Kill(c.pid, syscall.SIGUSR1); err != nil {
		return fmt.Errorf("releasing the producer's callbacks (SIGUSR1 to pid %d): %w", c.pid, err)
	}
	return nil
}

// stop ends the child: SIGTERM to its process group (it closes its
// producers and prints its stats), SIGKILL after StopGrace. It is safe to
// call more than once.
func (c *child) stop() error {
	c.stopOnce.Do(func() {
		select {
		case <-c.done:
		default:
			_ = syscall.Kill(-c.pid, syscall.SIGTERM)
			select {
			case <-c.done:
			case <-time.After(c.grace):
				_ = syscall.Kill(-c.pid, syscall.SIGKILL)
				<-c.done
				c.stopErr = fmt.Errorf("the producer did not exit within %s of SIGTERM and was killed", c.grace)
				return
			}
		}
		// Anything the child left in its group goes too.
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		if c.waitErr != nil {
			c.stopErr = fmt.Errorf("the producer exited with %v; its last words: %s", c.waitErr, c.stderr.Tail())
		}
	})
	return c.stopErr
}

func (c *child) exitString() string {
	<-c.done
	if c.waitErr == nil {
		return "exit status 0; its last words: " + c.stderr.Tail()
	}
	return c.waitErr.Error() + "; its last words: " + c.stderr.Tail()
}

// stats parses the child's --stats-json output: the last JSON object line.
func (c *child) stats() (*producer.Stats, error) {
	<-c.done
	lines := strings.Split(strings.TrimSpace(c.stdout.String()), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var st producer.Stats
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			return nil, fmt.Errorf("the producer's --stats-json output: %w: %q", err, l)
		}
		return &st, nil
	}
	return nil, errors.New("the producer printed no --stats-json object")
}

// tailBuffer keeps the last lines a child wrote to stderr and relays every
// line to a logger (relayLine).
type tailBuffer struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	log     *slog.Logger
}

const tailLines = 5

func newTailBuffer(l *slog.Logger) *tailBuffer { return &tailBuffer{log: l} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		line := relayLine(t.log, t.partial[:i])
		t.partial = t.partial[i+1:]
		t.lines = append(t.lines, line)
		if len(t.lines) > tailLines {
			t.lines = t.lines[1:]
		}
	}
	return len(p), nil
}

// relayLine logs one line of the child's stderr as the record it is: the
// child (kdiag produce --log-format json) writes slog's JSON records, whose
// time, level, message and attributes become a record of l's, with l's own
// attributes (scenario, source) beside them. A line that is not such a
// record (a panic, a message from the runtime) is logged whole, as a
// warning. It returns the line for the tail: the level and message.
func relayLine(l *slog.Logger, line []byte) string {
	r, ok := parseRecord(line)
	if !ok {
		text := string(line)
		l.Warn(text)
		return text
	}
	if h := l.Handler(); h.Enabled(context.Background(), r.Level) {
		_ = h.Handle(context.Background(), r)
	}
	return r.Level.String() + " " + r.Message
}

// parseRecord reads a record written by slog.JSONHandler: an object with
// time, level and msg first, then the attributes, whose order is kept.
func parseRecord(line []byte) (slog.Record, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return slog.Record{}, false
	}
	var (
		when  time.Time
		level slog.Level
		msg   string
		attrs []slog.Attr
		seen  int
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return slog.Record{}, false
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return slog.Record{}, false
		}
		str, isStr := v.(string)
		switch {
		case key == slog.TimeKey && isStr:
			if when, err = time.Parse(time.RFC3339Nano, str); err != nil {
				return slog.Record{}, false
			}
			seen++
		case key == slog.LevelKey && isStr:
			if level.UnmarshalText([]byte(str)) != nil {
				return slog.Record{}, false
			}
			seen++
		case key == slog.MessageKey && isStr:
			msg = str
			seen++
		default:
			attrs = append(attrs, slog.Any(key, v))
		}
	}
	if seen != 3 {
		return slog.Record{}, false
	}
	r := slog.NewRecord(when, level, msg, 0)
	r.AddAttrs(attrs...)
	return r, true
}

// Tail returns the last lines, joined with " | ".
func (t *tailBuffer) Tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := append([]string(nil), t.lines...)
	if len(t.partial) > 0 {
		all = append(all, string(t.partial))
	}
	if len(all) == 0 {
		return "(nothing on stderr)"
	}
	return strings.Join(all, " | ")
}
