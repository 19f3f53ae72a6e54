// Package broker implements `kdiag broker`: an embedded Kafka cluster that
// closes idle connections, for running an application against and watching
// whether its client leaves CLOSE_WAIT behind.
package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
)

// BrokerOptions are the parsed flags and dependencies of `kdiag broker`.
type BrokerOptions struct {
	IO *cmdutil.IOStreams
	// Context ends the run (SIGINT/SIGTERM in a real run).
	Context context.Context

	Brokers    int
	Ports      []int
	Listen     string
	Advertise  string
	Idle       time.Duration
	Topics     []string
	Partitions int
	// MaxRequestBytes is the broker's socket.request.max.bytes.
	MaxRequestBytes int
	// MaxQueuedRequestBytes bounds the request bytes held across all
	// connections (queued.max.request.bytes).
	MaxQueuedRequestBytes int64
	// RetentionBytes bounds each partition's log (log.retention.bytes);
	// -1 keeps every record.
	RetentionBytes int64
	LogLevel       string
	Duration       time.Duration
}

// NewCmdBroker returns `kdiag broker`. runF, when non-nil, replaces the run
// (flag tests capture the options with it).
func NewCmdBroker(f *cmdutil.Factory, runF func(*BrokerOptions) error) *cobra.Command {
	opts := &BrokerOptions{IO: f.IO}
	var ports string
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run an embedded Kafka cluster that closes idle connections",
		Long: `Run an embedded Kafka cluster (franz-go's kfake) of --brokers brokers on 127.0.0.1
that closes every connection idle for --idle, as a real broker does with
connections.max.idle.ms (600000 ms = 10m by default).

Point your application at it with a short --idle and watch its sockets: a client
that does not read idle connections keeps each connection the broker closed in
CLOSE_WAIT (a passive close) until it writes on it again or closes it.

Every accept and close is logged to stderr with the client's address, the broker's
node id, Kafka's connection id (local-remote-index, new for each connection even
from the same client port) and why it closed: idle (the broker's timeout), client
closed (EOF), invalid request, shutdown. On exit kdiag prints how many connections each broker
accepted and who closed them.

Every request is checked before the embedded cluster reads it, as a real broker's
SocketServer does: a frame larger than --max-request-bytes (socket.request.max.bytes),
an unknown API key, a version the broker does not serve, or a request that does not
parse closes that connection only, with a warning that says why. An ApiVersions
request of a newer version is answered with UNSUPPORTED_VERSION, and a CreateTopics or
CreatePartitions that would make more than 10000 partitions with POLICY_VIOLATION, as
Kafka does.

Its memory is bounded. It holds at most --max-queued-request-bytes of requests at
once across all connections (32 MiB; Kafka's queued.max.request.bytes): a request
takes room as its bytes arrive and gives it back once answered, a connection that
finds no room waits (a warning says so when it starts), and a frame larger than the
bound is refused. A request costs about 2-3 times its size while held. Each partition
keeps its last --retention-bytes (64 MiB; log.retention.bytes): the oldest batches
are dropped and the log start offset moves past them, so a consumer asking for a
dropped offset gets OFFSET_OUT_OF_RANGE, as from Kafka. Under heavy production a
partition costs up to 3-4 times that in resident memory. Out of file descriptors
(ulimit -n), it warns (at most once a minute) and keeps accepting as connections
close.

Ports 9092, 9093, ... are used when free, other free ports otherwise (it says so).
Topics are created on first use; --topic pre-creates them.`,
		Example: `  # three brokers that close connections idle for 3 seconds
  kdiag broker --idle 3s
  # then run your app with bootstrap.servers=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
  # and watch it:  kdiag scan --pid <pid>   (or: ss -tnp state close-wait)

  # one broker on a chosen port, a topic with 6 partitions, for one minute
  kdiag broker --brokers 1 --ports 19092 --topic orders --partitions 6 --duration 1m

  # try a third-party client
  kdiag broker --idle 2s &
  echo hello | kcat -b 127.0.0.1:9092 -P -t test

  # run for days under a load test: 16 MiB a partition, 64 MiB of requests at once
  kdiag broker --retention-bytes 16777216 --max-queued-request-bytes 67108864`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ports != "" {
				for _, p := range strings.Split(ports, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(p))
					if err != nil || n < 0 || n > 65535 {
						return cmdutil.UsageErrorf("--ports: %q is not a port number", p)
					}
					opts.Ports = append(opts.Ports, n)
				}
				if !cmd.Flags().Changed("brokers") {
					opts.Brokers = len(opts.Ports)
				} else if len(opts.Ports) != opts.Brokers {
					return cmdutil.UsageErrorf("--ports lists %d ports for --brokers %d: give one port per broker", len(opts.Ports), opts.Brokers)
				}
			}
			if opts.Brokers < 1 {
				return cmdutil.UsageErrorf("--brokers must be at least 1")
			}
			if opts.Idle < 0 || opts.Duration < 0 || opts.Partitions < 0 {
				return cmdutil.UsageErrorf("--idle, --duration and --partitions must not be negative")
			}
			if opts.MaxRequestBytes < 1 || opts.MaxRequestBytes > math.MaxInt32 {
				return cmdutil.UsageErrorf("--max-request-bytes: %d is out of range: give 1 to %d bytes", opts.MaxRequestBytes, math.MaxInt32)
			}
			if opts.MaxQueuedRequestBytes < 1 {
				return cmdutil.UsageErrorf("--max-queued-request-bytes: %d is out of range: give a number of bytes, at least 1", opts.MaxQueuedRequestBytes)
			}
			if opts.RetentionBytes == 0 || opts.RetentionBytes < -1 {
				return cmdutil.UsageErrorf("--retention-bytes: %d is out of range: give a number of bytes, or -1 to keep every record", opts.RetentionBytes)
			}
			if net.ParseIP(opts.Listen) == nil {
				return cmdutil.UsageErrorf("--listen: %q is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)", opts.Listen)
			}
			if _, err := cmdutil.ParseLogLevel(opts.LogLevel); err != nil {
				return cmdutil.UsageErrorf("--log-level: %v", err)
			}
			ctx, stop := cmdutil.InterruptContext(cmd.Context())
			defer stop()
			opts.Context = ctx
			if runF != nil {
				return runF(opts)
			}
			return runBroker(opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Brokers, "brokers", 3, "number of brokers")
	fl.StringVar(&ports, "ports", "", "comma list of ports, one per broker (default 9092,9093,... when free)")
	fl.StringVar(&opts.Listen, "listen", "127.0.0.1", "address to bind; anything but loopback exposes the broker")
	fl.StringVar(&opts.Advertise, "advertise", "", "host to advertise in metadata (default the --listen address, or the host name for 0.0.0.0)")
	fl.DurationVar(&opts.Idle, "idle", 10*time.Minute, "close connections idle this long (the broker's connections.max.idle.ms); 0 never")
	fl.StringArrayVar(&opts.Topics, "topic", nil, "topic to create at start (repeatable); others are created on first use")
	fl.IntVar(&opts.Partitions, "partitions", 0, "partitions per topic (default one per broker)")
	fl.IntVar(&opts.MaxRequestBytes, "max-request-bytes", broker.DefaultMaxRequestBytes, "refuse a request frame larger than this, closing its connection (the broker's socket.request.max.bytes)")
	fl.Int64Var(&opts.MaxQueuedRequestBytes, "max-queued-request-bytes", broker.DefaultMaxQueuedRequestBytes, "hold at most this many request bytes at once across all connections; readers wait for room, larger frames are refused (the broker's queued.max.request.bytes)")
	fl.Int64Var(&opts.RetentionBytes, "retention-bytes", broker.DefaultRetentionBytes, "keep at most this many bytes of each partition, dropping the oldest batches (the broker's log.retention.bytes); -1 keeps every record")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "log level of the accept/close log on stderr: debug|info|warn")
	fl.DurationVar(&opts.Duration, "duration", 0, "stop after this long (default: run until Ctrl-C)")
	return cmd
}

func runBroker(opts *BrokerOptions) error {
	level, err := cmdutil.ParseLogLevel(opts.LogLevel)
	if err != nil {
		return cmdutil.UsageErrorf("--log-level: %v", err)
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	// 0 is broker.Config's default; the banner says which.
	if opts.MaxQueuedRequestBytes == 0 {
		opts.MaxQueuedRequestBytes = broker.DefaultMaxQueuedRequestBytes
	}
	if opts.RetentionBytes == 0 {
		opts.RetentionBytes = broker.DefaultRetentionBytes
	}
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	if ip := net.ParseIP(opts.Listen); ip != nil && !ip.IsLoopback() {
		fmt.Fprintf(opts.IO.ErrOut, "warning: --listen %s exposes an unauthenticated Kafka broker to the network; use 127.0.0.1 unless you mean it\n", opts.Listen)
	}
	logger := slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: level}))
	c, err := broker.Start(ctx, broker.Config{
		Brokers:    opts.Brokers,
		Ports:      opts.Ports,
		Listen:     opts.Listen,
		Advertise:  opts.Advertise,
		Idle:       opts.Idle,
		Topics:     opts.Topics,
		Partitions: opts.Partitions,
		Logger:     logger,

		MaxRequestBytes:       opts.MaxRequestBytes,
		MaxQueuedRequestBytes: opts.MaxQueuedRequestBytes,
		RetentionBytes:        opts.RetentionBytes,
	})
	if err != nil {
		return &cmdutil.ExitError{Code: 1, Err: err}
	}
	defer c.Close()

	out := opts.IO.Out
	idle := "never closes idle connections"
	if opts.Idle > 0 {
		idle = fmt.Sprintf("closes connections idle for %s (connections.max.idle.ms=%d)", opts.Idle, opts.Idle.Milliseconds())
	}
	fmt.Fprintf(out, "kdiag broker: %s on %s, %s.\n", human.Plural(opts.Brokers, "broker"), opts.Listen, idle)
	retention := "keeps every record"
	if opts.RetentionBytes > 0 {
		retention = "keeps the last " + byteSize(opts.RetentionBytes) + " of each partition"
	}
	fmt.Fprintf(out, "It %s and holds at most %s of requests at once.\n", retention, byteSize(opts.MaxQueuedRequestBytes))
	for _, n := range c.Notes() {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	bs := c.BootstrapServers()
	fmt.Fprintf(out, `
  bootstrap.servers=%s

Point a client at it, e.g.
  your application with bootstrap.servers=%s
  echo hello | kcat -b %s -P -t test
Then watch the client's sockets: kdiag scan --pid <pid>   (or: ss -tnp state close-wait)
Accepts and closes are logged to stderr. `, bs, bs, bs)
	if opts.Duration > 0 {
		fmt.Fprintf(out, "Stops after %s or on Ctrl-C.\n", opts.Duration)
	} else {
		fmt.Fprintln(out, "Ctrl-C stops.")
	}

	<-ctx.Done()
	c.Close()
	writeStats(out, c.Stats())
	return nil
}

// writeStats prints what each broker accepted and who closed it.
func writeStats(w io.Writer, s broker.Stats) {
	fmt.Fprintln(w, "\nConnections:")
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("NODE", "ADDRESS", "ACCEPTED", "CLOSED IDLE (BY BROKER)", "CLOSED BY CLIENT", "CLOSED INVALID REQUEST", "CLOSED AT SHUTDOWN", "OTHER")
	row := func(node, addr string, c broker.Counts) {
		_ = t.Append(node, addr, strconv.Itoa(c.Accepted), strconv.Itoa(c.ClosedIdle), strconv.Itoa(c.ClosedByClient), strconv.Itoa(c.ClosedInvalid), strconv.Itoa(c.ClosedShutdown), strconv.Itoa(c.ClosedOther))
	}
	for _, b := range s.Brokers {
		row(strconv.Itoa(int(b.Node)), b.Addr, b.Counts)
	}
	row("all", "", s.Counts)
	_ = t.Render()
}

// byteSize writes n bytes in MiB when it is a whole number of them.
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return human.Plural(int(n), "byte")
}
