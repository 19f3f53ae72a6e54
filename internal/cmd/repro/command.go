package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/atomicfile"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/redact"
	"github.com/kdiag/kdiag/repro"
	"github.com/spf13/cobra"
)

// commandHelp is the part of kdiag repro's help about -- CMD.
const commandHelp = `With -- CMD [ARGS...], kdiag repro runs your own program instead: the embedded
cluster starts (--brokers, --broker-idle, --topic), CMD runs with the bootstrap
list in KAFKA_BOOTSTRAP_SERVERS, in every {bootstrap} of ARGS, and in each
--bootstrap-env NAME. kdiag follows CMD and every process it starts (their
sockets to the brokers every --sample-interval, and the broker's side of every
connection: who closed it after how long idle), names the client library as
kdiag doctor does, and drives the broker's idle closes: every --broker-idle
from the first connection it closes each connection that waits for nothing
from the broker (--broker-closes idle leaves it to the brokers' own timer). For
--duration (30s) after the first connection it reports what the client did with
each close (closed at once, reconnected, held CLOSE_WAIT how long with what
Recv-Q, held CLOSE after keepalive), whether its connections grew, and a
one-line verdict with the client's own fix. --report FILE.md writes a Markdown
report to paste into an issue of the client's project (FILE.html: an HTML
report, as kdiag report writes); -o json has everything.

--netns (root) runs the cluster and CMD in a private network namespace whose
net.ipv4.tcp_fin_timeout is 2s, so that keepalive's reset of a held CLOSE_WAIT
shows within seconds (a Go client's first probe comes 15s after its last use).

Exit status with -- CMD: 0 when no socket was held past --max-hold (default the
broker idle timeout), 1 when one was, 2 for bad usage, 3 when kdiag could not see
(CMD exited early, said with its exit status and the last lines of its stderr;
it never connected; no close could be made).`

// commandExamples are kdiag repro -- CMD's examples.
const commandExamples = `
  # your Go service: does it close, reconnect, or hold CLOSE_WAIT?
  kdiag repro -- ./my-service --brokers {bootstrap}

  # a Spring Boot service, with a Markdown report for its issue tracker
  kdiag repro --report repro.md -- java -jar app.jar --spring.kafka.bootstrap-servers={bootstrap}

  # a Python producer that reads BROKERS from its environment, as JSON
  kdiag repro --bootstrap-env BROKERS -o json -- python3 producer.py

  # see keepalive turn held CLOSE_WAIT into held CLOSE (as root)
  sudo kdiag repro --netns --duration 40s -- ./my-service {bootstrap}`

// netnsEnv marks the kdiag that --netns started in the private namespace:
// it sets the namespace up and runs the command there.
const netnsEnv = "KDIAG_REPRO_IN_NETNS"

// NetNSFinTimeout is the private namespace's net.ipv4.tcp_fin_timeout: the
// broker's side of a closed connection (FIN_WAIT2, orphaned) is gone after
// it, so that the client's next keepalive probe draws a reset.
const NetNSFinTimeout = 2 * time.Second

// commandFormats are the -o formats of kdiag repro -- CMD.
var commandFormats = []string{"table", "json"}

// checkCommand checks the flags of a -- CMD run and fills its defaults.
func checkCommand(cmd *cobra.Command, opts *ReproOptions, scenarios, command []string) error {
	if len(scenarios) > 0 {
		return cmdutil.UsageErrorf("give scenarios or -- CMD, not both (%s before --)", strings.Join(scenarios, " "))
	}
	if len(command) == 0 {
		return cmdutil.UsageErrorf("nothing after --: give the command to run, e.g. kdiag repro -- ./my-service {bootstrap}")
	}
	if opts.Bootstrap != "" {
		return cmdutil.UsageErrorf("--bootstrap-server does not apply to -- CMD: the command runs against the embedded cluster")
	}
	if cmd.Flags().Changed("parallel") {
		return cmdutil.UsageErrorf("--parallel applies to scenarios, not to -- CMD")
	}
	if err := cmdutil.CheckFormat(opts.Output, commandFormats); err != nil {
		return err
	}
	if opts.Closes != repro.ClosesDriven && opts.Closes != repro.ClosesIdle {
		return cmdutil.UsageErrorf("--broker-closes %q: want driven or idle", opts.Closes)
	}
	if opts.MaxHold < 0 || opts.ConnectTimeout < 0 {
		return cmdutil.UsageErrorf("--max-hold and --connect-timeout must not be negative")
	}
	if opts.Brokers < 1 || opts.Brokers > 16 {
		return cmdutil.UsageErrorf("--brokers %d: want 1 to 16", opts.Brokers)
	}
	for _, name := range opts.BootstrapEnv {
		if name == "" || strings.ContainsAny(name, "= \t\n") {
			return cmdutil.UsageErrorf("--bootstrap-env %q is not an environment variable name", name)
		}
	}
	for _, f := range opts.Reports {
		if _, err := reportFormat(f); err != nil {
			return cmdutil.UsageErrorf("--report %s: %v", f, err)
		}
	}
	if opts.Duration == 0 {
		opts.Duration = repro.DefaultCommandDuration
	}
	if opts.MaxHold == 0 {
		opts.MaxHold = opts.BrokerIdle
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = repro.DefaultConnectTimeout
	}
	opts.Command = command
	return nil
}

// reportFormat picks a report's writer by its file name.
func reportFormat(name string) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".md", ".markdown":
		return "markdown", nil
	case ".html", ".htm":
		return "html", nil
	}
	return "", errors.New("name it FILE.md (Markdown) or FILE.html (HTML)")
}

// runCommand is kdiag repro -- CMD: in the private network namespace with
// --netns (a kdiag started there does the run), else here.
func runCommand(opts *ReproOptions) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.NetNS && os.Getenv(netnsEnv) == "" {
		return runInNetNS(ctx, opts)
	}
	finTimeout := time.Duration(0)
	if opts.NetNS {
		if err := setupNetNS(NetNSFinTimeout); err != nil {
			return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("repro: --netns: %w", err)}
		}
		finTimeout = NetNSFinTimeout
	}
	logger := slog.New(slog.DiscardHandler)
	var output io.Writer
	if opts.Verbose {
		logger = slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
		output = opts.IO.ErrOut
	}
	width := opts.Width
	if width <= 0 {
		width = DefaultWidth
	}
	var prog *cmdProgress
	if opts.Output != "json" {
		fmt.Fprintln(opts.IO.Out, wrap(commandHeadline(opts), width, ""))
		prog = &cmdProgress{w: opts.IO.Out, tty: opts.IO.IsStdoutTTY() && !opts.Verbose}
	}
	co := repro.CommandOptions{
		Command: opts.Command, BootstrapEnv: opts.BootstrapEnv, Brokers: opts.Brokers, Topic: opts.Topic,
		BrokerIdle: opts.BrokerIdle, Closes: opts.Closes, Duration: opts.Duration, ConnectTimeout: opts.ConnectTimeout,
		MaxHold: opts.MaxHold, SampleInterval: opts.SampleInterval, ProcRoot: opts.ProcRoot, Output: output,
		Logger: logger, NetNS: opts.NetNS, FinTimeout: finTimeout,
	}
	if prog != nil {
		co.Progress = prog.update
	}
	run := opts.RunCommand
	if run == nil {
		run = repro.RunCommand
	}
	res, err := run(ctx, co)
	if prog != nil {
		prog.done()
	}
	if errors.Is(err, repro.ErrCommandStart) {
		return cmdutil.UsageErrorf("repro: %v", err)
	}
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: err}
	}
	for _, f := range opts.Reports {
		if err := writeReport(f, res); err != nil {
			return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("repro: --report %s: %w", f, err)}
		}
	}
	if opts.Output == "json" {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else if err := writeCommandText(opts.IO.Out, res, width); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return cmdutil.Exit(res.ExitCode)
	}
	return nil
}

// commandHeadline says what is about to run.
func commandHeadline(opts *ReproOptions) string {
	closes := fmt.Sprintf("kdiag closes every idle connection every %s from the first connection", human.Age(opts.BrokerIdle))
	if opts.Closes == repro.ClosesIdle {
		closes = fmt.Sprintf("the brokers close connections idle for %s", human.Age(opts.BrokerIdle))
	}
	where := "127.0.0.1"
	if opts.NetNS {
		where += " in a private network namespace"
	}
	return fmt.Sprintf("kdiag repro -- %s: %s on %s; %s; watching for %s after the first connection (at most %s for it), a socket held past %s is held.",
		strings.Join(redact.Args(opts.Command), " "), human.Plural(opts.Brokers, "broker"), where, closes, human.Age(opts.Duration), human.Age(opts.ConnectTimeout), human.Age(opts.MaxHold))
}

// writeReport writes one --report file, whole or not at all.
func writeReport(name string, res *repro.CommandResult) error {
	format, err := reportFormat(name)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if format == "html" {
		err = writeHTMLReport(&b, res)
	} else {
		err = writeMarkdownReport(&b, res)
	}
	if err != nil {
		return err
	}
	return atomicfile.Write(name, b.Bytes(), 0o644)
}

// cmdProgress shows the counts as the run goes: on a terminal one line
// redrawn in place (cleared before the table), elsewhere nothing (the
// table after says it all).
type cmdProgress struct {
	w     io.Writer
	tty   bool
	drawn bool
	last  time.Time
}

func (p *cmdProgress) update(s repro.Sample) {
	if !p.tty || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\x1b[K  %5.1fs  ESTABLISHED %3d  CLOSE_WAIT %3d  CLOSE %3d", s.Elapsed.Seconds(), s.Established, s.CloseWait, s.HeldClose)
	p.drawn = true
}

func (p *cmdProgress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
