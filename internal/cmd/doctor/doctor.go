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
  - its sockets: CLOSE_WAIT, held CLOSE (open in the process, in no kernel
    table: what keepalive makes of a CLOSE_WAIT), ESTABLISHED to the brokers,
    and the oldest CLOSE_WAIT's age as tcp_info bounds it: exact, "~59s" when
    the broker's idle timeout (measured, or --broker-idle-ms) narrows it, or
    "at least 14s, at most 1m02s" when keepalive's ACKs have reset it;
  - the config it runs with (files its command line names, Spring Boot files in
    its working directory, SPRING_KAFKA_* and KAFKA_* variables) and what kdiag
    lint finds there;
  - a ranked diagnosis: each finding with the evidence it rests on, what will
    end the state if nothing changes, and a fix in the library's own terms
    (docs/clients.md lists what kdiag knows of each).

One look is enough for a client that does not read idle connections
(franz-go, Sarama, kafka-go): sockets the broker closed, their FIN unread
(Recv-Q 1), are a warning however young. For a client that closes on the FIN
(Java with a polling network thread, librdkafka, kafkajs, kafka-python), or one
kdiag cannot name, CLOSE_WAIT becomes a finding when held past --stuck-age or
growing. When doctor shows CLOSE_WAIT or held CLOSE with no finding it says
why. With --duration it scans every --interval for that long and gives a
trend verdict (step, growing, draining, steady), which needs 6 scans over 30s.

The text is short: per finding what, its evidence, what ends it and the fix;
-o wide adds the client's evidence, every thread and lint finding, the causes
weighed with their sources, and the notes on what the scan could not see.
Command lines are shown with secrets masked. Run it as root to see every
process's fds and threads.

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
	fl.DurationVar(&opts.Duration, "duration", 0, "sample for this long for a trend verdict, which needs 6 scans over 30s (0: one look)")
	fl.DurationVar(&opts.Interval, "interval", time.Second, "time between scans with --duration")
	fl.DurationVar(&opts.StuckAge, "stuck-age", time.Minute, "CLOSE_WAIT older than this is a finding even when not growing")
	fl.Int64Var(&opts.BrokerIdleMS, "broker-idle-ms", 600000, "the broker's connections.max.idle.ms for the config lint; when not given, the idle time the broker's closes showed, if they showed one")
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
