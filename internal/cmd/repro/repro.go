// Package repro implements `kdiag repro`: run the reference producer
// against an idle-closing broker in scenarios that do and do not leave
// CLOSE_WAIT behind, watch the producer's sockets, and say what each shows.
package repro

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/internal/human"

	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/repro"
	"github.com/spf13/cobra"
)

// ReproOptions are the parsed flags and dependencies of `kdiag repro`.
type ReproOptions struct {
	IO *cmdutil.IOStreams
	// Context ends the run (SIGINT/SIGTERM in a real run).
	Context context.Context
	// Executable is the kdiag binary run as `kdiag produce`.
	Executable string
	// Sockets reads the producer's sockets.
	Sockets repro.SocketSource
	// Run runs one scenario (repro.Run; tests may replace it).
	Run func(ctx context.Context, sc repro.Scenario, opts repro.Options, progress func(repro.Sample)) (*repro.Result, error)

	Scenarios      []string
	Bootstrap      string
	BrokerIdle     time.Duration
	Scale          float64
	Duration       time.Duration
	SampleInterval time.Duration
	Topic          string
	Parallel       bool
	Verbose        bool
	Output         string
	// Width is what the table and the text fit: the terminal's width, or
	// DefaultWidth when standard output is not a terminal.
	Width int

	// Brokers is the embedded cluster's size.
	Brokers int

	// The options of kdiag repro -- CMD.

	// Command is CMD and its arguments (after --); empty for scenarios.
	Command []string
	// BootstrapEnv names more variables to carry the bootstrap list.
	BootstrapEnv []string
	// MaxHold, ConnectTimeout and Closes: repro.CommandOptions's.
	MaxHold        time.Duration
	ConnectTimeout time.Duration
	Closes         string
	// NetNS runs the cluster and CMD in a private network namespace.
	NetNS bool
	// Reports are the --report files (FILE.md, FILE.html).
	Reports []string
	// ProcRoot is the proc filesystem's root.
	ProcRoot string
	// Args are kdiag's own arguments after "kdiag", for --netns to run
	// it again in the namespace.
	Args []string
	// RunCommand runs -- CMD (repro.RunCommand; tests may replace it).
	RunCommand func(ctx context.Context, o repro.CommandOptions) (*repro.CommandResult, error)
}

var formats = []string{"table", "wide", "json"}

// NewCmdRepro returns `kdiag repro`. runF, when non-nil, replaces the run.
func NewCmdRepro(f *cmdutil.Factory, runF func(*ReproOptions) error) *cobra.Command {
	opts := &ReproOptions{IO: f.IO, Run: repro.Run}
	cmd := &cobra.Command{
		Use:   "repro [SCENARIO...] | kdiag repro [flags] -- CMD [ARGS...]",
		Short: "Reproduce passive-close CLOSE_WAIT, or see what your own client does with the broker's idle close",
		Long: `Reproduce, in about ` + human.Age(defaultRunTime()) + `, how a Kafka producer ends up with sockets in CLOSE_WAIT.

Each scenario starts an embedded 3-broker Kafka cluster on 127.0.0.1 that closes
connections idle for --broker-idle (the broker's connections.max.idle.ms), runs
kdiag's reference producer (kdiag produce, a child process that follows
kafka-clients 3.9.0's connections, as measured against the real client) with the
scenario's reader and settings, reads the producer's sockets every
--sample-interval, and reports what it saw: how many were in CLOSE_WAIT at the
peak and at the end, for how long, who closed what, and a verdict. With no
SCENARIO, all of them run, at the same time (each with its own broker on free
ports and its own producer; --parallel=false runs them one after another).

Scenarios, and the real clients each stands for:
` + scenarioHelp() + `
Timers are scaled: real defaults are divided by --scale (200), so the broker's
10m idle timeout becomes 3s, and every time kdiag repro prints (the scenarios
above, the table, the verdicts) is at that scale. Per scenario:
` + scaleHelp() + `
` + wrap(repro.RequestTimeoutNote+". Delivery timeouts keep their real values too.", 80, "") + `

The table fits the terminal (80 columns when output is not one); -o wide adds
the producer's configuration and both sides' counts of connections, -o json
has everything, the samples included.

Against a real cluster (--bootstrap-server), tell kdiag its idle timeout with
--broker-idle (default 10m); the scenario timers are derived from it, and
--duration should be a few times it. The topic must exist or be auto-created.

Exit status: 0 when every scenario showed what it is meant to, 1 when one did
not (the verdict says what was seen), 2 for bad flags.

` + commandHelp,
		Example: `  # every scenario, about ` + human.Age(defaultRunTime()) + `
  kdiag repro

  # one scenario, longer, with the broker's and producer's logs on stderr
  kdiag repro passive-close --duration 30s --verbose

  # every detail, however wide
  kdiag repro -o wide

  # as JSON, for a script
  kdiag repro -o json | jq '.scenarios[] | {name, close_wait_peak, verdict}'

  # against a real test cluster whose brokers have connections.max.idle.ms=30000
  kdiag repro --bootstrap-server kafka-1:9092,kafka-2:9092 --broker-idle 30s --duration 2m
` + commandExamples,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				return runE(cmd, f, opts, args[:dash], args[dash:], runF)
			}
			if opts.NetNS || len(opts.Reports) > 0 || len(opts.BootstrapEnv) > 0 {
				return cmdutil.UsageErrorf("--netns, --report and --bootstrap-env apply to -- CMD: kdiag repro [flags] -- CMD [ARGS...]")
			}
			for _, a := range args {
				if _, ok := repro.Lookup(a); !ok {
					return cmdutil.UsageErrorf("unknown scenario %q: want one of %s", a, strings.Join(repro.Names(), ", "))
				}
			}
			opts.Scenarios = args
			if err := cmdutil.CheckFormat(opts.Output, formats); err != nil {
				return err
			}
			if err := checkShared(opts); err != nil {
				return err
			}
			if opts.BrokerIdle == 0 {
				if opts.Bootstrap != "" {
					if cmd.Flags().Changed("scale") {
						return cmdutil.UsageErrorf("--scale applies to the embedded broker; with --bootstrap-server give the cluster's idle timeout with --broker-idle")
					}
					opts.BrokerIdle = repro.RealBrokerIdle
				} else {
					opts.BrokerIdle = time.Duration(float64(repro.RealBrokerIdle) / opts.Scale).Round(time.Millisecond)
				}
			}
			if opts.BrokerIdle < 100*time.Millisecond {
				return cmdutil.UsageErrorf("the broker idle timeout %s is too short to observe (at least 100ms: lower --scale)", opts.BrokerIdle)
			}
			ctx, stop := cmdutil.InterruptContext(cmd.Context())
			defer stop()
			opts.Context = ctx
			opts.Executable = f.Executable
			if opts.Width = f.IO.TerminalWidth(); opts.Width <= 0 {
				opts.Width = DefaultWidth
			}
			if opts.Sockets == nil {
				opts.Sockets = repro.ScannerSource(f.ProcRoot)
			}
			if runF != nil {
				return runF(opts)
			}
			return runRepro(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Bootstrap, "bootstrap-server", "", "a real cluster's bootstrap servers instead of the embedded broker")
	fl.DurationVar(&opts.BrokerIdle, "broker-idle", 0, "the broker's connections.max.idle.ms (default 10m/--scale, or 10m with --bootstrap-server)")
	fl.Float64Var(&opts.Scale, "scale", repro.DefaultScale, "divide the real timers by this for the embedded broker")
	fl.DurationVar(&opts.Duration, "duration", 0, "how long each scenario runs (default 4x the broker idle timeout: 12s); with -- CMD, how long to watch after its first connection (default 30s)")
	fl.DurationVar(&opts.SampleInterval, "sample-interval", repro.DefaultSampleInterval, "time between readings of the producer's sockets")
	fl.StringVar(&opts.Topic, "topic", repro.DefaultTopic, "topic to produce to")
	fl.BoolVar(&opts.Parallel, "parallel", true, "run the scenarios at the same time, each with its own broker and producer (--parallel=false: one after another)")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "log the broker's accepts and closes and the producer's connection events (with -- CMD: its output) to stderr")
	fl.IntVar(&opts.Brokers, "brokers", 3, "brokers in the embedded cluster")
	fl.StringArrayVar(&opts.BootstrapEnv, "bootstrap-env", nil, "-- CMD: also set this environment variable to the bootstrap list (repeatable; KAFKA_BOOTSTRAP_SERVERS always is)")
	fl.DurationVar(&opts.MaxHold, "max-hold", 0, "-- CMD: a socket the broker closed and the client held this long is held: exit 1 (default the broker idle timeout)")
	fl.DurationVar(&opts.ConnectTimeout, "connect-timeout", 0, "-- CMD: how long to wait for its first connection to the brokers (default 1m)")
	fl.StringVar(&opts.Closes, "broker-closes", repro.ClosesDriven, "-- CMD: driven (kdiag closes every idle connection every --broker-idle) or idle (the brokers' own idle timer)")
	fl.BoolVar(&opts.NetNS, "netns", false, "-- CMD: run the cluster and CMD in a private network namespace with a 2s tcp_fin_timeout (root)")
	fl.StringArrayVar(&opts.Reports, "report", nil, "-- CMD: write a report, FILE.md (Markdown) or FILE.html (repeatable)")
	cmdutil.FormatFlag(fl, &opts.Output, "table", formats)
	return cmd
}

// checkShared checks the flags the scenarios and -- CMD share.
func checkShared(opts *ReproOptions) error {
	if opts.Scale <= 0 {
		return cmdutil.UsageErrorf("--scale must be positive (200 turns the broker's 10m idle timeout into 3s)")
	}
	if opts.Duration < 0 || opts.BrokerIdle < 0 {
		return cmdutil.UsageErrorf("--duration and --broker-idle must not be negative")
	}
	if opts.SampleInterval < 10*time.Millisecond {
		return cmdutil.UsageErrorf("--sample-interval must be at least 10ms")
	}
	return nil
}

// runE checks and runs kdiag repro -- CMD.
func runE(cmd *cobra.Command, f *cmdutil.Factory, opts *ReproOptions, scenarios, command []string, runF func(*ReproOptions) error) error {
	if err := checkCommand(cmd, opts, scenarios, command); err != nil {
		return err
	}
	if err := checkShared(opts); err != nil {
		return err
	}
	if opts.BrokerIdle == 0 {
		opts.BrokerIdle = time.Duration(float64(repro.RealBrokerIdle) / opts.Scale).Round(time.Millisecond)
	}
	if opts.BrokerIdle < 100*time.Millisecond {
		return cmdutil.UsageErrorf("the broker idle timeout %s is too short to observe (at least 100ms)", opts.BrokerIdle)
	}
	if !cmd.Flags().Changed("max-hold") {
		opts.MaxHold = opts.BrokerIdle
	}
	if opts.NetNS {
		if why := netnsSupported(); why != "" {
			return cmdutil.UsageErrorf("%s", why)
		}
	}
	ctx, stop := cmdutil.InterruptContext(cmd.Context())
	defer stop()
	opts.Context = ctx
	opts.Executable = f.Executable
	opts.ProcRoot = f.ProcRoot
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Args == nil && len(os.Args) > 1 {
		opts.Args = os.Args[1:]
	}
	if opts.Width = f.IO.TerminalWidth(); opts.Width <= 0 {
		opts.Width = DefaultWidth
	}
	if runF != nil {
		return runF(opts)
	}
	return runCommand(opts)
}

// scenarioHelp describes each scenario at the default scale.
func scenarioHelp() string {
	var b strings.Builder
	for _, s := range repro.Catalog() {
		fmt.Fprintf(&b, "  %-17s %s\n", s.Name, wrap(s.Describe(repro.RealBrokerIdle/repro.DefaultScale)+". Stands for "+s.StandsFor+".", 60, strings.Repeat(" ", 20)))
	}
	return b.String()
}

func scaleHelp() string {
	b := repro.RealBrokerIdle / repro.DefaultScale
	var w strings.Builder
	fmt.Fprintf(&w, "  broker connections.max.idle.ms  %s -> %s\n", repro.RealBrokerIdle, b)
	fmt.Fprintf(&w, "  metadata.max.age.ms             %s -> %s\n", repro.RealMetadataMaxAge, repro.Scale(repro.RealMetadataMaxAge, b))
	fmt.Fprintf(&w, "  request.timeout.ms              %s (not scaled: below)\n", repro.RealRequestTimeout)
	for _, s := range repro.Catalog() {
		var parts []string
		if s.ClientIdle >= 0 {
			parts = append(parts, fmt.Sprintf("client idle %s -> %s", s.ClientIdle, repro.Scale(s.ClientIdle, b)))
		} else {
			parts = append(parts, "client idle -1 (never)")
		}
		parts = append(parts, fmt.Sprintf("a message every %s -> %s", s.Interval, repro.Scale(s.Interval, b)))
		if s.BlockCallbacks {
			parts = append(parts, "callbacks block until every connection is in CLOSE_WAIT")
		}
		fmt.Fprintf(&w, "  %-17s %s\n", s.Name, strings.Join(parts, ", "))
	}
	return w.String()
}

func runRepro(opts *ReproOptions) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var scenarios []repro.Scenario
	if len(opts.Scenarios) == 0 {
		scenarios = repro.Catalog()
	}
	for _, n := range opts.Scenarios {
		sc, _ := repro.Lookup(n)
		scenarios = append(scenarios, sc)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	childLevel := "info"
	if opts.Verbose {
		logger = slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
		childLevel = "debug"
	}
	ro := repro.Options{
		Executable:     opts.Executable,
		Bootstrap:      opts.Bootstrap,
		BrokerIdle:     opts.BrokerIdle,
		Duration:       opts.Duration,
		SampleInterval: opts.SampleInterval,
		Topic:          opts.Topic,
		Brokers:        opts.Brokers,
		Sockets:        opts.Sockets,
		Logger:         logger,
		ChildLogLevel:  childLevel,
	}
	duration := opts.Duration
	if duration == 0 {
		duration = 4 * opts.BrokerIdle
	}

	width := opts.Width
	if width <= 0 {
		width = DefaultWidth
	}
	var prog *progress
	if opts.Output != "json" {
		prog = newProgress(opts.IO.Out, opts.IO.IsStdoutTTY() && !opts.Verbose, scenarios, duration, width)
		fmt.Fprintln(opts.IO.Out, wrap(headline(opts, len(scenarios), duration), width, ""))
		fmt.Fprintln(opts.IO.Out)
	}

	results := make([]*repro.Result, len(scenarios))
	errs := make([]error, len(scenarios))
	runOne := func(i int) {
		sc := scenarios[i]
		if prog != nil {
			prog.start(i)
		}
		var cb func(repro.Sample)
		if prog != nil {
			cb = func(s repro.Sample) { prog.update(i, s) }
		}
		results[i], errs[i] = opts.Run(ctx, sc, ro, cb)
		if prog != nil {
			prog.finish(i, results[i], errs[i])
		}
	}
	if opts.Parallel {
		var wg sync.WaitGroup
		for i := range scenarios {
			wg.Add(1)
			go func() { defer wg.Done(); runOne(i) }()
		}
		wg.Wait()
	} else {
		for i := range scenarios {
			if ctx.Err() != nil {
				break
			}
			runOne(i)
		}
	}
	if prog != nil {
		prog.close()
	}

	var done []*repro.Result
	var failed []string
	for i, r := range results {
		if errs[i] != nil {
			failed = append(failed, errs[i].Error())
		}
		if r != nil {
			done = append(done, r)
		}
	}
	switch opts.Output {
	case "json":
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			BrokerIdleMS int64           `json:"broker_idle_ms"`
			Scenarios    []*repro.Result `json:"scenarios"`
			Errors       []string        `json:"errors,omitempty"`
		}{opts.BrokerIdle.Milliseconds(), done, failed}); err != nil {
			return err
		}
	case "wide":
		if err := writeWide(opts.IO.Out, done); err != nil {
			return err
		}
		writeExplanations(opts.IO.Out, done, width)
	default:
		if err := writeTable(opts.IO.Out, done, width); err != nil {
			return err
		}
		writeExplanations(opts.IO.Out, done, width)
	}

	if ctx.Err() != nil {
		return &cmdutil.ExitError{Code: 1, Err: errors.New("repro: interrupted; the producer and the broker were stopped")}
	}
	if len(failed) > 0 {
		return &cmdutil.ExitError{Code: 1, Err: errors.New(strings.Join(failed, "; "))}
	}
	for _, r := range done {
		if !r.AsExpected {
			return cmdutil.Exit(cmdutil.ExitFindings)
		}
	}
	return nil
}

// startStop is what a scenario takes beyond its duration: starting the
// broker and the producer, and stopping them. Measured with
// "time kdiag repro" (5 scenarios in parallel, 12s each): 12.4 and 12.5 s
// of wall time on 2 cores at load 19; after the stalled scenario's hold
// grew to AtOnce (issue 27), 12.4, 12.5 and 13.4 s at load 13-16.
const startStop = 400 * time.Millisecond

// runTime is how long a run of n scenarios of duration each takes, to the
// second: the one figure the help, the headline and the README give.
func runTime(duration time.Duration, n int, parallel bool) time.Duration {
	total := duration + startStop
	if !parallel {
		total *= time.Duration(n)
	}
	return total.Round(time.Second)
}

// defaultRunTime is runTime for a plain `kdiag repro`.
func defaultRunTime() time.Duration {
	return runTime(4*(repro.RealBrokerIdle/repro.DefaultScale), len(repro.Catalog()), true)
}

// headline says what is about to run, how long it takes and at what scale
// the times it prints are.
func headline(opts *ReproOptions, n int, duration time.Duration) string {
	where := "an embedded 3-broker cluster on 127.0.0.1"
	if opts.Bootstrap != "" {
		where = opts.Bootstrap
	}
	total := runTime(duration, n, opts.Parallel)
	scale := float64(repro.RealBrokerIdle) / float64(opts.BrokerIdle)
	times := fmt.Sprintf("Times are real: the broker closes idle connections after %s.", human.Age(opts.BrokerIdle))
	if opts.BrokerIdle != repro.RealBrokerIdle {
		times = fmt.Sprintf("Every time below is at the run's scale, the real timers divided by %g: the broker's 10m idle timeout is %s here, the Java client's 9m is %s.",
			scale, human.Age(opts.BrokerIdle), human.Age(repro.Scale(9*time.Minute, opts.BrokerIdle)))
	}
	return fmt.Sprintf("kdiag repro: %s against %s, %s each (about %s in all). %s",
		human.Plural(n, "scenario"), where, human.Age(duration), human.Age(total), times)
}
