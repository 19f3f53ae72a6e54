// Package produce implements `kdiag produce`: the reference producer
// (package producer) sending messages on an interval. kdiag repro runs it as
// its child process; users run it to see the Java lifecycle against their
// own cluster.
package produce

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/producer"
	"github.com/spf13/cobra"
)

// ProduceOptions are the parsed flags and dependencies of `kdiag produce`.
// kdiag repro relies on these flags: keep their names and meaning.
type ProduceOptions struct {
	IO *cmdutil.IOStreams
	// Context ends the run (SIGINT/SIGTERM in a real run).
	Context context.Context

	ConfigFile string
	// Bootstrap overrides bootstrap.servers when set.
	Bootstrap string
	// Set holds key=value overrides, applied after the file.
	Set      []string
	Topic    string
	Messages int
	Interval time.Duration
	// Reader overrides kdiag.reader when set.
	Reader string
	// Model overrides kdiag.model when set: java-3.9 or java-2.1.
	Model string
	// CallbackDelay overrides kdiag.callback.delay.ms when CallbackDelaySet.
	CallbackDelay    time.Duration
	CallbackDelaySet bool
	// BlockCallbacks makes every send callback block on the network
	// goroutine until Release is closed (SIGUSR1 in a real run) or the run
	// ends; from then on none blocks.
	BlockCallbacks bool
	// Release ends the callbacks' block (BlockCallbacks).
	Release            <-chan struct{}
	ProducerPerMessage bool
	Duration           time.Duration
	LogLevel           string
	// LogFormat is text (slog's key=value lines) or json (one object a
	// line; kdiag repro reads its child's log so and logs each line as its
	// own).
	LogFormat string
	StatsJSON bool
}

// NewCmdProduce returns `kdiag produce`. runF, when non-nil, replaces the
// run (flag tests capture the options with it).
func NewCmdProduce(f *cmdutil.Factory, runF func(*ProduceOptions) error) *cobra.Command {
	opts := &ProduceOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Run the reference producer (Java KafkaProducer's connection lifecycle)",
		Long: `Run kdiag's reference producer: a Kafka producer whose connections follow the real
Java KafkaProducer's, version by version (--model java-3.9, the default, or java-2.1),
as measured against kafka-clients 3.9.0 and 2.1.1, over the real Kafka protocol. 3.9.0
connects at creation to one bootstrap server (METADATA, INIT_PRODUCER_ID), 2.1.1 to
none until the first send; both then connect only to the leaders they send to, close at
most one idle connection per poll (connections.max.idle.ms), and after a disconnect
fetch metadata and reconnect. It sends --messages messages to --topic, one every --interval.

Configuration is a Java producer .properties file (--config), read by the same parser
as kdiag lint, with --bootstrap-server and --set key=value on top. kdiag's own keys:
  kdiag.model=java-3.9|java-2.1 the kafka-clients version followed (--model)
  kdiag.reader=poll|on-demand   how a connection meets the broker's FIN: poll reads
                                every connection all the time, as both Java versions
                                do (the FIN is seen and the socket closed at once:
                                no CLOSE_WAIT); on-demand reads only while a response
                                is pending, as the Go clients Sarama, franz-go and
                                kafka-go do (the socket stays in CLOSE_WAIT until the
                                next request on it)
  kdiag.callback.delay.ms=N     every send callback sleeps N ms on the network
                                goroutine, as a slow callback stalls Java's network
                                thread (both versions): no FIN is processed meanwhile

--block-callbacks makes every send callback block the network goroutine, as a Java
callback that blocks its network thread does (the only way a polling Java client holds
CLOSE_WAIT), until the process gets SIGUSR1 (kill -USR1 PID), after which none blocks: a stuck callback
for as long as you choose (kdiag repro's stalled-callback scenario releases it once
the broker has closed every connection).

--producer-per-message creates a new producer for every message and never closes it:
the connection leak of an application that does so.

Connection events are logged to stderr at --log-level debug in the words of that
version's NetworkClient. On Ctrl-C, SIGTERM, the last message or --duration, the
producer is closed (leaked ones are not): it flushes what is buffered, for up to
delivery.timeout.ms after the last message, for up to 3s after a signal or the end of
--duration, whichever comes first (a second signal stops at once). With --stats-json, one
JSON object of counters (connections opened, closed by the client and why, closed by
the broker first, records) is printed to stdout. Exit status 0; 1 if the producer cannot
start, or if messages were sent and none was delivered; 2 for bad flags or configuration.`,
		Example: `  # against kdiag broker's default cluster, 10 messages, Java-style logs
  kdiag produce --bootstrap-server 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 \
    --messages 10 --log-level debug

  # your application's config, with the Sarama-like reader: watch CLOSE_WAIT appear
  kdiag produce --config producer.properties --set connections.max.idle.ms=-1 \
    --reader on-demand --interval 30s

  # a slow callback, for one minute, counters as JSON at the end
  kdiag produce --bootstrap-server 127.0.0.1:9092 --callback-delay 5s --duration 1m --stats-json

  # a callback stuck until you release it: kill -USR1 <pid of kdiag produce>
  kdiag produce --bootstrap-server 127.0.0.1:9092 --block-callbacks --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Messages < 0 || opts.Interval < 0 || opts.Duration < 0 || opts.CallbackDelay < 0 {
				return cmdutil.UsageErrorf("--messages, --interval, --duration and --callback-delay must not be negative")
			}
			if opts.Topic == "" {
				return cmdutil.UsageErrorf("--topic must not be empty")
			}
			if opts.Reader != "" {
				if _, err := producer.ParseReaderMode(opts.Reader); err != nil {
					return cmdutil.UsageErrorf("--reader: %v", err)
				}
			}
			if opts.Model != "" {
				if _, err := producer.ParseModel(opts.Model); err != nil {
					return cmdutil.UsageErrorf("--model: %v", err)
				}
			}
			if _, err := cmdutil.ParseLogLevel(opts.LogLevel); err != nil {
				return cmdutil.UsageErrorf("--log-level: %v", err)
			}
			if opts.LogFormat != "text" && opts.LogFormat != "json" {
				return cmdutil.UsageErrorf("--log-format: %q: want text or json", opts.LogFormat)
			}
			if _, err := producer.ParseOverrides(opts.Set); err != nil {
				return cmdutil.UsageErrorf("--set: %v", err)
			}
			opts.CallbackDelaySet = cmd.Flags().Changed("callback-delay")
			// Before the producer exists, so that a SIGUSR1 sent once its
			// connections are seen never meets the default action (exit).
			release, stopRelease := releaseOnSIGUSR1()
			defer stopRelease()
			opts.Release = release
			ctx, stop := cmdutil.InterruptContext(cmd.Context())
			defer stop()
			opts.Context = ctx
			if runF != nil {
				return runF(opts)
			}
			return runProduce(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ConfigFile, "config", "", "producer .properties file")
	fl.StringVar(&opts.Bootstrap, "bootstrap-server", "", "comma list of host:port (overrides bootstrap.servers)")
	fl.StringArrayVar(&opts.Set, "set", nil, "key=value producer setting on top of --config (repeatable)")
	fl.StringVar(&opts.Topic, "topic", "kdiag-repro", "topic to produce to")
	fl.IntVar(&opts.Messages, "messages", 0, "messages to send; 0: until --duration or a signal")
	fl.DurationVar(&opts.Interval, "interval", time.Second, "time between sends")
	fl.StringVar(&opts.Reader, "reader", "", "poll|on-demand (overrides kdiag.reader; default poll)")
	fl.StringVar(&opts.Model, "model", "", "java-3.9|java-2.1: the kafka-clients version followed (overrides kdiag.model; default java-3.9)")
	fl.DurationVar(&opts.CallbackDelay, "callback-delay", 0, "sleep this long in every send callback (overrides kdiag.callback.delay.ms)")
	fl.BoolVar(&opts.BlockCallbacks, "block-callbacks", false, "block every send callback on the network goroutine until SIGUSR1, then none")
	fl.BoolVar(&opts.ProducerPerMessage, "producer-per-message", false, "new producer for each message, never closed (the leak)")
	fl.DurationVar(&opts.Duration, "duration", 0, "stop after this long; 0: no limit")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "stderr log level: debug|info|warn")
	fl.StringVar(&opts.LogFormat, "log-format", "text", "stderr log format: text|json (one JSON object a line)")
	fl.BoolVar(&opts.StatsJSON, "stats-json", false, "on exit print the counters as one JSON object to stdout")
	return cmd
}

// stopFlush bounds the final flush after a signal or --duration: below
// kdiag repro's grace (5s) between SIGTERM and SIGKILL.
const stopFlush = 3 * time.Second

// statsJSON is what --stats-json prints: the counters summed over every
// producer, and how many producers there were.
type statsJSON struct {
	producer.Stats
	Producers int `json:"producers"`
}

// config builds the producer configuration from the file and the flags.
func (opts *ProduceOptions) config() (producer.Config, error) {
	over, err := producer.ParseOverrides(opts.Set)
	if err != nil {
		return producer.Config{}, cmdutil.UsageErrorf("--set: %v", err)
	}
	if opts.Bootstrap != "" {
		over["bootstrap.servers"] = opts.Bootstrap
	}
	if opts.Reader != "" {
		over[producer.KeyReader] = opts.Reader
	}
	if opts.Model != "" {
		over[producer.KeyModel] = opts.Model
	}
	if opts.CallbackDelaySet {
		over[producer.KeyCallbackDelay] = strconv.FormatInt(opts.CallbackDelay.Milliseconds(), 10)
	}
	cfg, err := producer.LoadConfigWith(opts.ConfigFile, over)
	if err != nil {
		return cfg, cmdutil.UsageErrorf("produce: %v", err)
	}
	if len(cfg.BootstrapServers) == 0 {
		return cfg, cmdutil.UsageErrorf("produce: no bootstrap servers: give --bootstrap-server host:port or bootstrap.servers in --config")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, cmdutil.UsageErrorf("produce: %v", err)
	}
	return cfg, nil
}

func runProduce(opts *ProduceOptions) error {
	level, err := cmdutil.ParseLogLevel(opts.LogLevel)
	if err != nil {
		return cmdutil.UsageErrorf("--log-level: %v", err)
	}
	cfg, err := opts.config()
	if err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	hopts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if opts.LogFormat == "json" {
		log = slog.New(slog.NewJSONHandler(opts.IO.ErrOut, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(opts.IO.ErrOut, hopts))
	}

	var producers []*producer.Producer
	newProducer := func() (*producer.Producer, error) {
		p, err := producer.New(cfg, producer.WithLogger(log))
		if err != nil {
			return nil, &cmdutil.ExitError{Code: 1, Err: fmt.Errorf("produce: %w", err)}
		}
		producers = append(producers, p)
		return p, nil
	}
	var cur *producer.Producer
	if !opts.ProducerPerMessage {
		if cur, err = newProducer(); err != nil {
			return err
		}
	}
	log.Info(fmt.Sprintf("kdiag produce: sending to topic %s every %s (reader %s, connections.max.idle.ms %d)",
		opts.Topic, opts.Interval, cfg.Reader, cfg.ConnectionsMaxIdle.Milliseconds()))

	block := opts.blocker(ctx, log)
	var notSent int
	ticker := time.NewTicker(max(opts.Interval, time.Millisecond))
	defer ticker.Stop()
loop:
	for i := 0; opts.Messages == 0 || i < opts.Messages; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				break loop
			case <-ticker.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		if opts.ProducerPerMessage {
			if cur, err = newProducer(); err != nil {
				return err
			}
		}
		n := i
		rec := producer.Record{Topic: opts.Topic, Value: []byte(fmt.Sprintf("kdiag produce message %d", n))}
		err := cur.Send(ctx, rec, func(md producer.RecordMetadata, err error) {
			block(n)
			if err != nil {
				log.Warn(fmt.Sprintf("message %d failed: %v", n, err))
				return
			}
			log.Info(fmt.Sprintf("message %d delivered to %s-%d@%d", n, md.Topic, md.Partition, md.Offset))
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			notSent++
			log.Warn(fmt.Sprintf("message %d not sent: %v", n, err))
		}
	}

	// Close (or, for the leaked producers, only flush) within a bound: after
	// the last of --messages, long enough for their delivery.timeout.ms; on
	// a signal or the end of --duration, briefly, so that a dead cluster
	// cannot keep the process alive (kdiag repro stops its child so).
	bound := cfg.DeliveryTimeout + 5*time.Second
	if ctx.Err() != nil {
		bound = stopFlush
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	// A signal or the end of --duration during that flush cuts it to
	// stopFlush too: --duration bounds the whole run, the flush included.
	stopCut := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(stopFlush, cancel)
		context.AfterFunc(closeCtx, func() { t.Stop() })
	})
	defer stopCut()
	stopNow, stopSig := cmdutil.InterruptContext(closeCtx)
	defer stopSig()
	if opts.ProducerPerMessage {
		for _, p := range producers {
			_ = p.Flush(stopNow) // never closed: the leak, until the process exits
		}
	} else if err := cur.Close(stopNow); err != nil {
		log.Warn(fmt.Sprintf("close: %v", err))
	}

	var sum statsJSON
	sum.Producers = len(producers)
	for _, p := range producers {
		addStats(&sum.Stats, p.Stats())
	}
	log.Info(fmt.Sprintf("kdiag produce: %d acked, %d failed, %d not sent; %d connections opened, %d closed by the client, %d by the broker",
		sum.RecordsAcked, sum.RecordsFailed, notSent, sum.ConnectionsOpened, sum.ClosedByClient(), sum.PeerCloses))
	if opts.StatsJSON {
		enc := json.NewEncoder(opts.IO.Out)
		if err := enc.Encode(sum); err != nil {
			return err
		}
	}
	// Messages were tried and none reached the broker: that is a failure
	// a script must see, whatever ended the run.
	if tried := sum.RecordsAcked + sum.RecordsFailed + int64(notSent); tried > 0 && sum.RecordsAcked == 0 {
		return &cmdutil.ExitError{Code: 1, Err: fmt.Errorf("produce: no message delivered (%d failed, %d not sent) to %s",
			sum.RecordsFailed, notSent, strings.Join(cfg.BootstrapServers, ","))}
	}
	return nil
}

// blocker returns what each send callback calls first: with
// --block-callbacks it blocks until Release is closed or ctx ends (a signal
// or --duration, so that Close is not held by it), saying so once; without,
// nothing.
func (opts *ProduceOptions) blocker(ctx context.Context, log *slog.Logger) func(msg int) {
	if !opts.BlockCallbacks {
		return func(int) {}
	}
	release := opts.Release
	if release == nil {
		release = make(chan struct{}) // never: only ctx ends the block
	}
	var said bool // callbacks run one at a time, on the network goroutine
	go func() {
		select {
		case <-release:
			log.Info("kdiag produce: callbacks released")
		case <-ctx.Done():
		}
	}()
	return func(msg int) {
		select {
		case <-release:
			return
		case <-ctx.Done():
			return
		default:
		}
		if !said {
			said = true
			log.Info(fmt.Sprintf("kdiag produce: message %d: callback blocking the network goroutine until SIGUSR1", msg))
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
}

func addStats(dst *producer.Stats, s producer.Stats) {
	dst.ConnectionsOpened += s.ConnectionsOpened
	dst.ConnectionsOpen += s.ConnectionsOpen
	dst.ConnectFailures += s.ConnectFailures
	dst.Reconnects += s.Reconnects
	dst.ClosedIdle += s.ClosedIdle
	dst.ClosedOnClose += s.ClosedOnClose
	dst.ClosedOnError += s.ClosedOnError
	dst.PeerCloses += s.PeerCloses
	dst.RecordsSent += s.RecordsSent
	dst.RecordsAcked += s.RecordsAcked
	dst.RecordsFailed += s.RecordsFailed
	dst.MetadataRequests += s.MetadataRequests
	dst.ProduceRequests += s.ProduceRequests
}
