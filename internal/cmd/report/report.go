// Package report implements `kdiag report`: replay a `kdiag watch --record`
// recording through the analyzer and write an HTML or Markdown report.
package report

import (
	"bytes"
	"fmt"
	"github.com/kdiag/kdiag/internal/atomicfile"
	"github.com/kdiag/kdiag/internal/human"
	"path/filepath"
	"strings"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/record"
	"github.com/kdiag/kdiag/report"
	"github.com/spf13/cobra"
)

// ReportOptions are the parsed flags of `kdiag report`.
type ReportOptions struct {
	IO       *cmdutil.IOStreams
	File     string
	Output   string
	Out      string
	Brokers  string
	StuckAge time.Duration
	Recent   time.Duration
}

// NewCmdReport returns `kdiag report`. runF, when non-nil, replaces runReport.
func NewCmdReport(f *cmdutil.Factory, runF func(*ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "report FILE",
		Short: "Replay a watch recording: findings, and an HTML or Markdown report with charts",
		Long: `Report reads a recording made by kdiag watch --record (one snapshot per JSON line),
runs the analyzer over the whole of it, and writes a report: a self-contained
HTML page (summary, findings, an SVG chart of CLOSE_WAIT and ESTABLISHED over
time per process) or Markdown to paste into a ticket.

The format is -o, or else --out's extension (.md: Markdown, else HTML); with
neither, Markdown goes to standard output. A last line cut short (watch was
killed mid-write), a corrupt line or one longer than 256 MiB (at most 416
bytes a socket: more than watch writes) is skipped with a note; a file whose
first line does not begin as a recording's is refused from its first bytes.`,
		Example: `  # an HTML report to open in a browser
  kdiag report watch.jsonl --out watch.html

  # Markdown for a ticket
  kdiag report watch.jsonl -o markdown > ticket.md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if opts.Output == "" {
				opts.Output = "markdown"
				if opts.Out != "" {
					opts.Output = "html"
					if ext := strings.ToLower(filepath.Ext(opts.Out)); ext == ".md" || ext == ".markdown" {
						opts.Output = "markdown"
					}
				}
			}
			if err := cmdutil.CheckFormat(opts.Output, cmdutil.Keys(report.Formats)); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runReport(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Output, "output", "o", "", "report format: "+strings.Join(cmdutil.Keys(report.Formats), "|")+" (default: from --out, else markdown)")
	fl.StringVar(&opts.Out, "out", "", "write the report to `PATH` instead of standard output")
	fl.StringVar(&opts.Brokers, "brokers", "", "Kafka bootstrap list host:port,... to mark brokers (default: ports 9092-9094)")
	fl.DurationVar(&opts.StuckAge, "stuck-age", time.Minute, "CLOSE_WAIT older than this is a finding even when not growing")
	fl.DurationVar(&opts.Recent, "recent", 2*time.Minute, "trailing part of the recording whose trend says what is happening now")
	return cmd
}

func runReport(o *ReportOptions) error {
	var brokers []netstat.Endpoint
	if o.Brokers != "" {
		b, err := netstat.ParseBrokers(o.Brokers)
		if err != nil {
			return cmdutil.UsageErrorf("--brokers: %v", err)
		}
		brokers = b
	}
	snaps, notes, err := record.ReadFile(o.File)
	if err != nil {
		return cmdutil.UsageErrorf("report: %v", err)
	}
	if n := record.SortByTime(snaps); n > 0 {
		notes = append(notes, record.Note{Text: fmt.Sprintf("%s out of time order (two watches appending to one file, or a file pieced together): sorted by time, none dropped",
			human.Plural(n, "snapshot"))})
	}
	var ns []string
	for _, n := range notes {
		msg := fmt.Sprintf("%s: %s", o.File, n)
		ns = append(ns, msg)
		fmt.Fprintf(o.IO.ErrOut, "kdiag report: note: %s\n", msg)
	}
	a := analyzer.Analyze(snaps, analyzer.Options{StuckAge: o.StuckAge, Recent: o.Recent, IsBroker: netstat.IsBroker(brokers)})
	in := report.Input{Origin: "recording " + filepath.Base(o.File), Analysis: a, Notes: ns}
	var buf bytes.Buffer
	if err := report.Formats[o.Output](&buf, in); err != nil {
		return err
	}
	if o.Out == "" {
		_, err := o.IO.Out.Write(buf.Bytes())
		return err
	}
	// 0600: a report holds command lines and endpoints.
	if err := atomicfile.Write(o.Out, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(o.IO.ErrOut, "kdiag report: %s: %s, %s written to %s\n", o.File, human.Plural(len(snaps), "snapshot"), human.Plural(len(a.Findings), "finding"), o.Out)
	return nil
}
