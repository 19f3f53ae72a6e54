// Package doctor implements `kdiag doctor`: name each Kafka client
// process's library, read its threads, find its config, and say what to do.
package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/netstat"
	"github.com/spf13/cobra"
)

// DoctorOptions are the parsed flags of `kdiag doctor` and its
// dependencies.
type DoctorOptions struct {
	IO       *cmdutil.IOStreams
	ProcRoot string
	Context  context.Context

	PIDs         []int
	Process      string
	Brokers      string
	Duration     time.Duration
	Interval     time.Duration
	StuckAge     time.Duration
	BrokerIdleMS int64
	// BrokerIdleGiven says --broker-idle-ms was given: it then stands
	// over what the broker's closes showed.
	BrokerIdleGiven bool
	Format          string
	// Doctor, when set, replaces doctor.Options' sources (tests).
	Doctor doctor.Options
}

// NewCmdDoctor returns `kdiag doctor`. runF, when non-nil, replaces
// runDoctor.
func NewCmdDoctor(f *cmdutil.Factory, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "Name each Kafka client process's library, read its threads, find its config, and say what to do",
		Long: `Doctor examines every Kafka client process on the host (or the ones named by
--pid and --process) and, for each, says:

  - the client library and its version, and what shows it: the Go module build
    info of the executable (franz-go, sarama, kafka-go, confluent-kafka-go), the
    JVM's kafka-clients jar (also inside a Spring Boot fat jar), librdkafka's
    version and the binding that loaded it (kcat, confluent-kafka-python,
    node-rdkafka), the imports of a Python or Node main script; or "client not
    identified";
  - its instances and network threads (Java: kafka-producer-network-thread,
    librdkafka: rdk:main and rdk:broker*), sampled 5 times over a second:
    polling (waiting in epoll_wait: it sees a broker's FIN), busy or blocked;
  - its sockets: CLOSE_WAIT, CLOSE (held open in no kernel table), ESTABLISHED
    to the brokers, and the oldest CLOSE_WAIT's age;
  - the config it runs with (files its command line names, Spring Boot files in
    its working directory, SPRING_KAFKA_* and KAFKA_* variables) and what kdiag
    lint finds there;
  - a ranked diagnosis: each finding with its evidence and a fix in the
    library's own terms (docs/clients.md lists what kdiag knows of each).

With --duration it scans every --interval for that long and gives a verdict
(step, growing, draining, steady). Command lines are shown with secrets masked.
Run it as root to see every process's fds and threads.

Exit status: 0 no warning, 1 warnings, 2 a critical finding, 3 kdiag could not
see (a named process it could not read, sockets it could not attribute, a
scan that failed).`,
		Example: `  # every Kafka client process on this host
  sudo kdiag doctor

  # one process, sampled for a minute, as Markdown for a ticket
  sudo kdiag doctor --pid 4242 --duration 1m -o markdown

  # Java processes, against a cluster whose brokers close idle connections at 5 minutes
  sudo kdiag doctor --process java --brokers kafka-1:9092,kafka-2:9092 --broker-idle-ms 300000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProcRoot = f.ProcRoot
			opts.BrokerIdleGiven = cmd.Flags().Changed("broker-idle-ms")
			if err := cmdutil.CheckFormat(opts.Format, cmdutil.Keys(doctor.Writers)); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runDoctor(opts)
		},
	}
	fl := cmd.Flags()
	fl.IntSliceVar(&opts.PIDs, "pid", nil, "only these processes (repeatable, or a comma list)")
	fl.StringVar(&opts.Process, "process", "", "only processes whose name or command line matches this regular expression")
	fl.StringVar(&opts.Brokers, "brokers", "", "Kafka bootstrap list host:port,...: the brokers (default: remote ports 9092-9094)")
	fl.DurationVar(&opts.Duration, "duration", 0, "sample for this long for a verdict (0: one scan)")
	fl.DurationVar(&opts.Interval, "interval", time.Second, "time between scans with --duration")
	fl.DurationVar(&opts.StuckAge, "stuck-age", time.Minute, "CLOSE_WAIT older than this is a finding even when not growing")
	fl.Int64Var(&opts.BrokerIdleMS, "broker-idle-ms", 600000, "the broker's connections.max.idle.ms, which the config lint compares with (default: what the broker's idle closes showed, else 600000)")
	cmdutil.FormatFlag(fl, &opts.Format, "text", cmdutil.Keys(doctor.Writers))
	return cmd
}

func runDoctor(o *DoctorOptions) error {
	if o.Duration < 0 || o.Interval < 10*time.Millisecond {
		return cmdutil.UsageErrorf("--duration must be 0 or more and --interval at least 10ms")
	}
	filters := cmdutil.Filters{PIDs: o.PIDs, Process: o.Process, Brokers: o.Brokers}
	q, err := filters.Query()
	if err != nil {
		return err
	}
	d := o.Doctor
	d.ProcRoot, d.Query, d.Duration, d.Interval, d.StuckAge, d.BrokerIdleMS = o.ProcRoot, q, o.Duration, o.Interval, o.StuckAge, o.BrokerIdleMS
	d.BrokerIdleGiven = o.BrokerIdleGiven
	if d.Scan == nil {
		sc := netstat.NewScanner(o.ProcRoot)
		sc.NoCache = o.Duration == 0
		d.Scan = sc.Scan
	}
	parent := o.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := cmdutil.InterruptContext(parent)
	defer stop()
	rep, err := doctor.Run(ctx, d)
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("doctor: %w", err)}
	}
	if err := doctor.Writers[o.Format](o.IO.Out, rep); err != nil {
		return err
	}
	if code := rep.ExitCode(); code != 0 {
		return cmdutil.Exit(code)
	}
	return nil
}
