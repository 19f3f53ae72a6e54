// Package clients knows Kafka client libraries: which one a process runs
// (Identify: Go module build info, the JVM's kafka-clients jar, librdkafka
// and the binding that loaded it, Python and Node packages), what each does
// with idle connections (the catalog: facts as data, each with its source),
// and what its network threads are doing (ReadThreads, Classify).
//
// The catalog is to client libraries what package rules' catalog is to
// config keys: one sorted slice of values, from which docs/clients.md, the
// diagnosis's wording and kdiag doctor's fixes are all made.
package clients

//go:generate go run ./gendocs -out ../docs/clients.md

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Library IDs: the values of Client.Library and of doctor's JSON
// client.library.
const (
	KafkaClients     = "kafka-clients"
	Librdkafka       = "librdkafka"
	ConfluentKafkaGo = "confluent-kafka-go"
	FranzGo          = "franz-go"
	Sarama           = "sarama"
	KafkaGo          = "kafka-go"
	KafkaPython      = "kafka-python"
	AIOKafka         = "aiokafka"
	KafkaJS          = "kafkajs"
	// KdiagProduce is kdiag's own reference producer (`kdiag produce`,
	// and the producer `kdiag repro` starts): Identify names it from the
	// kdiag binary's command line, not from a client module.
	KdiagProduce = "kdiag-produce"
)

// SelfRepo is kdiag's own repository: a Source in it has no commit, since
// it is the tree the catalog is built with (TestCatalog checks that its
// files and symbols are there).
const SelfRepo = "kdiag/kdiag"

// Source is where a fact can be checked: a repository, a file in it, the
// symbol or line that says it, and the commit it was read at.
type Source struct {
	Repo   string
	Path   string
	Symbol string
	// Commit is the commit (or tag) the fact was read at.
	Commit string
	// Tag is the release tag that names Commit, "" when none does.
	Tag string
}

// String writes "owner/repo path (symbol) at commit", or "at tag (commit)".
func (s Source) String() string {
	out := s.Repo + " " + s.Path
	if s.Symbol != "" {
		out += " (" + s.Symbol + ")"
	}
	if s.Commit != "" {
		c := s.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if s.Tag != "" {
			c = s.Tag + " (" + c + ")"
		}
		out += " at " + c
	}
	return out
}

// Fact is one statement about a library and where it can be checked.
type Fact struct {
	Says   string
	Source Source
}

// ThreadNames says how a library names its OS threads, so that
// /proc/<pid>/task/*/comm can count its instances and find its network
// threads. Linux keeps 15 bytes of a thread name (TASK_COMM_LEN 16 with the
// NUL, include/linux/sched.h), so the prefixes are what survives the cut.
type ThreadNames struct {
	// Network is the comm prefix of the threads that read and write the
	// broker sockets.
	Network string
	// Instance is the comm prefix of the one thread each client instance
	// starts, "" when the network threads are not one per instance.
	Instance string
	// Full is the name as the library sets it, for people.
	Full string
	// StuckIsBlind says whether a network thread that is not polling
	// cannot see a broker's FIN: true for Java's Sender (one thread does
	// all the I/O of one producer); false for librdkafka, whose broker
	// thread of a disconnected broker waits on its queue, not its socket.
	StuckIsBlind bool
	Fact         Fact
}

// Measurement is one behaviour measured here against kdiag's broker: what
// the client leaves after the broker closes its idle connections. Most
// come from measured.json, which the clients test runs under kdiag repro
// -- CMD write and check (clients/repro_test.go, reproMeasured).
type Measurement struct {
	// Version is the version measured, as the artifact names it.
	Version string
	// Setup is how the client was configured, "" for the defaults.
	Setup string
	// HoldsCloseWait says whether the client keeps the sockets the broker
	// closed in CLOSE_WAIT.
	HoldsCloseWait bool
	// Blocked says the setup kept the client's network thread (or event
	// loop) from polling, as a callback that blocks it does: a client that
	// reads idle connections holds CLOSE_WAIT for as long as it is blocked.
	Blocked bool
	// Result is what was seen, in words.
	Result string
	// How is how and where it was measured.
	How string
}

// VersionFact is a fact about what a library does with its connections
// over its life (at start-up, after the first metadata, at idle expiry,
// after the broker's close), for the versions it names, read at their
// tags.
type VersionFact struct {
	// Versions is the versions the fact holds for ("2.1.1", "2.1.1 and
	// 3.9.0"), "" for every version the catalog covers.
	Versions string
	// Topic is the part of the life it is about: "start-up", "idle
	// expiry", ...
	Topic string
	Fact
	// Also are where the fact was read at the other versions it names.
	Also []Source
}

// Variant is a setting of a library that changes how it meets the
// broker's FIN (kdiag produce's kdiag.reader): the values it changes. A
// Library's own values are those of its default; Library.WithVariant
// applies one.
type Variant struct {
	// Setting and Value name it: kdiag.reader and on-demand.
	Setting, Value string
	ReadsIdle      bool
	Reads          Fact
	CloseWait, Fix string
	// Ends is Library.Ends for this variant.
	Ends     string
	Measured []Measurement
}

// Library is what kdiag knows of one Kafka client library.
type Library struct {
	// ID is the Client.Library value: kafka-clients, franz-go, ...
	ID string
	// Name is the library as people call it; Module its package name(s).
	Name     string
	Module   string
	Language string
	// Core is the library this one wraps ("librdkafka" for
	// confluent-kafka-go), whose connection handling it has.
	Core string
	// Recognized says how Identify recognizes a process that runs it.
	Recognized string

	// ReadsIdle says whether the library keeps reading connections it has
	// nothing pending on, and so sees the broker's FIN and closes.
	ReadsIdle bool
	Reads     Fact
	// IdleSetting is the library's own setting for closing idle
	// connections, "" when it has none; IdleDefault its default (0:
	// disabled or none).
	IdleSetting string
	IdleDefault time.Duration
	Idle        Fact
	// Keepalive is its TCP keepalive default.
	Keepalive Fact

	// CloseWait is what CLOSE_WAIT sockets toward brokers mean in a
	// process that runs this library.
	CloseWait string
	// Fix is what to change, in the library's own API.
	Fix string
	// Ends says, for a library that holds the broker's idle closes in
	// CLOSE_WAIT, what closes such a socket if nothing is changed.
	Ends string
	// Rules are the kdiag lint rules that check its configuration.
	Rules []string
	// Threads is how it names its threads; nil when it starts none that
	// /proc can tell apart (goroutines, an event loop).
	Threads *ThreadNames
	// Measured is its behaviour measured against kdiag broker.
	Measured []Measurement
	// Lifecycle is what it does with its connections from start-up on,
	// by version, each fact with its source at that version.
	Lifecycle []VersionFact
	// Variants are the settings that change ReadsIdle, Reads, CloseWait
	// and Fix; the values above are the default's.
	Variants []Variant
}

// WithVariant returns the library as it runs with setting=value (one of
// Variants): a copy with that variant's reading, meaning, fix, end and
// measurements. A value that is no variant's (the default's) gives l.
func (l *Library) WithVariant(value string) *Library {
	for _, v := range l.Variants {
		if v.Value == value {
			c := *l
			c.ReadsIdle, c.Reads, c.CloseWait, c.Fix, c.Ends, c.Measured = v.ReadsIdle, v.Reads, v.CloseWait, v.Fix, v.Ends, v.Measured
			c.Variants = nil
			return &c
		}
	}
	return l
}

// HoldsIdleCloseWait reports whether the library leaves the broker's idle
// closes in CLOSE_WAIT: it does not read idle connections.
func (l *Library) HoldsIdleCloseWait() bool { return !l.ReadsIdle }

// Commits the facts below were read at.
const (
	kafka39Commit    = "dd5272687e8adf9e79e3e329b1b3d2524afb6020"
	kafka39Tag       = "3.9.0-rc3" // the commit voted as 3.9.0
	kafka21Commit    = "21234bee31165527859b46ea48c46b76532f7a37"
	kafka21Tag       = "2.1.1"
	librdkafkaCommit = "4c3b017c3de8d9c10de12b9eec0ea688e8d5787d"
	ckgCommit        = "b88333d3d307e04b0b3cf95b60e00433340cb937"
	franzCommit      = "adb3a18abe14bdb230f1cd738d03623301013d42"
	saramaCommit     = "bd98b3aec67780cf514f219ed0342c5c1d9e1b75"
	kafkaGoCommit    = "3ce29796ef96c7f55bfb64b505c0fcb3c2fd233e"
	kafkaPyTag       = "2.0.2"
	aiokafkaCommit   = "672947afe85c91b7d953f0259e69837a711d3246"
	kafkajsTag       = "v2.2.4"
	goVersion        = "go1.26"
)

// goKeepalive is Go's dialer default, which every pure-Go client inherits
// unless it sets net.Dialer.KeepAlive.
var goKeepalive = Fact{
	Says:   "Go's net.Dialer default: keepalive on, first probe after 15 s idle, then every 15 s, 9 probes (the client does not change it)",
	Source: Source{Repo: "golang/go", Path: "src/net/dial.go", Symbol: "defaultTCPKeepAliveIdle, defaultTCPKeepAliveInterval, defaultTCPKeepAliveCount", Commit: goVersion},
}

// catalog is every library kdiag knows, sorted by ID (TestCatalog checks).
var catalog = []*Library{
	{
		ID: AIOKafka, Name: "aiokafka", Module: "aiokafka (PyPI)", Language: "Python",
		Recognized: "a python process whose main script imports aiokafka; the version from the aiokafka package installed for that interpreter",
		ReadsIdle:  true,
		Reads: Fact{Says: "each connection runs a reader task (AIOKafkaConnection._read) that awaits the next frame whether or not a request is pending, so the broker's FIN ends it and the connection closes",
			Source: Source{Repo: "aio-libs/aiokafka", Path: "aiokafka/conn.py", Symbol: "AIOKafkaConnection.connect, _read", Commit: aiokafkaCommit}},
		IdleSetting: "connections_max_idle_ms", IdleDefault: 540 * time.Second,
		Idle: Fact{Says: "connections_max_idle_ms=540000 (9 minutes): an idle checker (_idle_check) closes the connection",
			Source: Source{Repo: "aio-libs/aiokafka", Path: "aiokafka/producer/producer.py", Symbol: "AIOKafkaProducer.__init__ connections_max_idle_ms=540000", Commit: aiokafkaCommit}},
		Keepalive: Fact{Says: "not set: asyncio's loop.create_connection leaves SO_KEEPALIVE off",
			Source: Source{Repo: "aio-libs/aiokafka", Path: "aiokafka/conn.py", Symbol: "AIOKafkaConnection.connect", Commit: aiokafkaCommit}},
		CloseWait: "aiokafka reads every connection, so CLOSE_WAIT toward a broker means the event loop is not running its reader tasks: blocked by synchronous code, or the producer abandoned without `await producer.stop()`.",
		Fix:       "Keep blocking calls off the event loop (run them in an executor) and `await producer.stop()` on every producer you create; keep connections_max_idle_ms (540000) below the broker's connections.max.idle.ms.",
	},
	{
		ID: ConfluentKafkaGo, Name: "confluent-kafka-go", Module: "github.com/confluentinc/confluent-kafka-go (and /v2)", Language: "Go",
		Core:       Librdkafka,
		Recognized: "the module in the Go build info of /proc/PID/exe, with its version; librdkafka is linked in statically",
		ReadsIdle:  true,
		Reads: Fact{Says: "a cgo wrapper of librdkafka, statically linked from a prebuilt bundle: librdkafka's broker threads do the I/O and read every connection",
			Source: Source{Repo: "confluentinc/confluent-kafka-go", Path: "kafka/librdkafka_vendor/README.md", Commit: ckgCommit}},
		IdleSetting: "connections.max.idle.ms", IdleDefault: 0,
		Idle: Fact{Says: "librdkafka's connections.max.idle.ms, default 0: idle connections are never closed by the client",
			Source: Source{Repo: "confluentinc/librdkafka", Path: "CONFIGURATION.md", Symbol: "connections.max.idle.ms", Commit: librdkafkaCommit}},
		Keepalive: Fact{Says: "librdkafka's socket.keepalive.enable, default false",
			Source: Source{Repo: "confluentinc/librdkafka", Path: "CONFIGURATION.md", Symbol: "socket.keepalive.enable", Commit: librdkafkaCommit}},
		CloseWait: "librdkafka reads every connection on its own broker threads, whether or not the application polls, so CLOSE_WAIT toward a broker is rarely librdkafka's: look for connections the program opens itself, or a librdkafka broker thread that is stuck.",
		Fix:       `Set "connections.max.idle.ms" in the kafka.ConfigMap below the broker's connections.max.idle.ms, and "socket.keepalive.enable": true, so that idle connections are closed by the client; call Close() on every Producer you create.`,
		Rules:     []string{"KD104", "KD102"},
		Threads: &ThreadNames{Network: "rdk:broker", Instance: "rdk:main", Full: "rdk:main (one per handle), rdk:broker<id> (one per broker)",
			Fact: Fact{Says: "librdkafka names its main thread rdk:main and each broker thread rdk:broker<nodeid>", Source: Source{Repo: "confluentinc/librdkafka", Path: "src/rdkafka.c, src/rdkafka_broker.c", Symbol: "rd_kafka_set_thread_sysname", Commit: librdkafkaCommit}}},
	},
	{
		ID: FranzGo, Name: "franz-go", Module: "github.com/twmb/franz-go", Language: "Go",
		Recognized: "the module in the Go build info of /proc/PID/exe, with its version",
		ReadsIdle:  false,
		Reads: Fact{Says: "a connection is read only while a response is pending (handleResps runs per request batch and exits when the ring is empty), except acks=0 produce connections, whose discard goroutine reads all the time",
			Source: Source{Repo: "twmb/franz-go", Path: "pkg/kgo/broker.go", Symbol: "brokerCxn.handleResps, brokerCxn.discard", Commit: franzCommit}},
		IdleSetting: "kgo.ConnIdleTimeout", IdleDefault: 30 * time.Second,
		Idle: Fact{Says: "ConnIdleTimeout default 30 s (at most 15 min); a reaper ticks every ConnIdleTimeout, so an idle connection is closed 1x to 2x ConnIdleTimeout after its last use, and one idle longer is not reused",
			Source: Source{Repo: "twmb/franz-go", Path: "pkg/kgo/config.go, pkg/kgo/broker.go", Symbol: "defaultCfg connIdleTimeout, ConnIdleTimeout, reapConnectionsLoop", Commit: franzCommit}},
		Keepalive: goKeepalive,
		CloseWait: "franz-go does not read a connection it has nothing pending on, so when the broker closes an idle connection the socket stays in CLOSE_WAIT (Recv-Q 1: the FIN unread) until franz-go writes on it again or its reaper closes it, 1x to 2x kgo.ConnIdleTimeout after the last use.",
		Fix:       "Keep kgo.ConnIdleTimeout (default 30s) well below the broker's connections.max.idle.ms, so the client closes idle connections first; a CLOSE_WAIT older than 2x ConnIdleTimeout means clients created and not closed: call Close() on every kgo.Client.",
		Ends:      "franz-go's next request on the connection (it reads the EOF and reconnects), or its reaper, 1x to 2x kgo.ConnIdleTimeout after the last use",
		Measured:  reproMeasured(FranzGo),
	},
	{
		ID: KafkaClients, Name: "Apache Kafka Java client", Module: "org.apache.kafka:kafka-clients", Language: "Java",
		Recognized: "kafka-clients-X.jar on the JVM's class path or open (also inside a Spring Boot fat jar: BOOT-INF/lib/kafka-clients-X.jar), or a shaded kafka/kafka-version.properties; the version from the jar",
		ReadsIdle:  true,
		Reads: Fact{Says: "the Selector registers every connection for OP_READ and the network thread reads each one that is ready, so a polling thread sees the FIN on its next poll and closes (the same at 2.1.1)",
			Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/common/network/Selector.java", Symbol: "Selector.register (OP_READ), pollSelectionKeys", Commit: kafka39Commit, Tag: kafka39Tag}},
		IdleSetting: "connections.max.idle.ms", IdleDefault: 540 * time.Second,
		Idle: Fact{Says: "connections.max.idle.ms default 540000 (9 minutes) for the producer; a negative value creates no IdleExpiryManager: never closed by the client. poll() closes at most one expired connection, after its select, and the poll timeout does not include the idle deadline (the same at 2.1.1)",
			Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java, common/network/Selector.java", Symbol: "CONNECTIONS_MAX_IDLE_MS_CONFIG 9 * 60 * 1000; idleExpiryManager, maybeCloseOldestConnection", Commit: kafka39Commit, Tag: kafka39Tag}},
		Keepalive: Fact{Says: "SO_KEEPALIVE set on every connection: the kernel's first probe after net.ipv4.tcp_keepalive_time (7200 s by default)",
			Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/common/network/Selector.java", Symbol: "configureSocketChannel: socket.setKeepAlive(true)", Commit: kafka39Commit, Tag: kafka39Tag}},
		CloseWait: "The Java client's network thread reads every connection: while it polls it reads the broker's FIN within milliseconds and closes, then reconnects when it next needs metadata (measured at 2.1.1 and 3.9.0: no CLOSE_WAIT, a reconnect about every broker idle period). CLOSE_WAIT toward a broker lasts only while kafka-producer-network-thread is not polling: a send callback or interceptor running on it blocks, or it waits on a lock.",
		Fix:       "Keep send callbacks and interceptors (onAcknowledgement) quick: they run on the network thread (kafka-producer-network-thread | <client.id>), which reads no socket while one runs; hand slow work to another executor, and find what blocks with a thread dump (jstack PID). connections.max.idle.ms does not help while the thread is blocked (measured: 2000 against the broker's 3000, every socket still sat in CLOSE_WAIT for 27 s).",
		Rules:     []string{"KD101", "KD102"},
		Threads: &ThreadNames{Network: "kafka-producer-", Instance: "kafka-producer-", Full: "kafka-producer-network-thread | <client.id>", StuckIsBlind: true,
			Fact: Fact{Says: `each KafkaProducer starts one Sender thread named "kafka-producer-network-thread | " + client.id (the same at 2.1.1)`, Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/KafkaProducer.java", Symbol: "NETWORK_THREAD_PREFIX, ioThreadName", Commit: kafka39Commit, Tag: kafka39Tag}}},
		Measured:  append(reproMeasured(KafkaClients), javaMeasured...),
		Lifecycle: javaLifecycle,
	},
	{
		ID: KafkaGo, Name: "kafka-go", Module: "github.com/segmentio/kafka-go", Language: "Go",
		Recognized: "the module in the Go build info of /proc/PID/exe, with its version",
		ReadsIdle:  false,
		Reads: Fact{Says: "a pooled connection is read only inside a round trip (conn.run, conn.roundTrip); between requests it sits on the idle stack unread",
			Source: Source{Repo: "segmentio/kafka-go", Path: "transport.go", Symbol: "conn.run, connGroup.releaseConn", Commit: kafkaGoCommit}},
		IdleSetting: "Transport.IdleTimeout", IdleDefault: 30 * time.Second,
		Idle: Fact{Says: "Transport.IdleTimeout default 30 s: a connection put back on the idle stack is closed by a timer (time.AfterFunc) that long after its last use; NewWriter's WriterConfig.IdleConnTimeout defaults to 9 minutes",
			Source: Source{Repo: "segmentio/kafka-go", Path: "transport.go, writer.go", Symbol: "Transport.idleTimeout, connGroup.releaseConn, NewWriter", Commit: kafkaGoCommit}},
		Keepalive: Fact{Says: "DefaultTransport dials with a net.Dialer that leaves KeepAlive 0: Go's default, first probe after 15 s idle, then every 15 s",
			Source: Source{Repo: "segmentio/kafka-go", Path: "transport.go", Symbol: "DefaultTransport", Commit: kafkaGoCommit}},
		CloseWait: "kafka-go does not read idle pooled connections, so a connection the broker closed stays in CLOSE_WAIT (Recv-Q 1) until Transport.IdleTimeout after its last use closes it, or the next request on it fails and is retried.",
		Fix:       "Keep Transport.IdleTimeout (default 30s; 9 minutes through WriterConfig.IdleConnTimeout) below the broker's connections.max.idle.ms; call Close() on every Writer and on a Transport you create yourself (CloseIdleConnections()).",
		Ends:      "kafka-go's idle timer, Transport.IdleTimeout after the last use, or the next request on it, which fails and is retried on a new connection",
		Measured:  reproMeasured(KafkaGo),
	},
	{
		ID: KafkaPython, Name: "kafka-python", Module: "kafka-python (PyPI), python3-kafka (Debian)", Language: "Python",
		Recognized: "a python process whose main script imports kafka; the version from the kafka-python package installed for that interpreter",
		ReadsIdle:  true,
		Reads: Fact{Says: "KafkaClient registers every connected socket for EVENT_READ and closes one that is readable with no request in flight (\"Socket EVENT_READ without in-flight-requests\")",
			Source: Source{Repo: "dpkp/kafka-python", Path: "kafka/client_async.py", Symbol: "KafkaClient._poll", Commit: kafkaPyTag}},
		IdleSetting: "connections_max_idle_ms", IdleDefault: 540 * time.Second,
		Idle: Fact{Says: "connections_max_idle_ms=540000 (9 minutes): KafkaClient._maybe_close_oldest_connection closes the least recently used connection idle that long",
			Source: Source{Repo: "dpkp/kafka-python", Path: "kafka/producer/kafka.py, kafka/client_async.py", Symbol: "KafkaProducer.DEFAULT_CONFIG, _maybe_close_oldest_connection", Commit: kafkaPyTag}},
		Keepalive: Fact{Says: "not set: socket_options defaults to [(IPPROTO_TCP, TCP_NODELAY, 1)] only",
			Source: Source{Repo: "dpkp/kafka-python", Path: "kafka/producer/kafka.py", Symbol: "KafkaProducer.DEFAULT_CONFIG socket_options", Commit: kafkaPyTag}},
		CloseWait: "kafka-python's sender thread reads every connection, so CLOSE_WAIT toward a broker means that thread is not polling (a blocking callback) or producers were dropped without close().",
		Fix:       "Keep the callbacks of send() short and call producer.close() on every KafkaProducer; keep connections_max_idle_ms (540000) below the broker's connections.max.idle.ms.",
		Measured:  reproMeasured(KafkaPython),
	},
	{
		ID: KafkaJS, Name: "KafkaJS", Module: "kafkajs (npm)", Language: "JavaScript",
		Recognized: "a node process whose main script requires kafkajs; the version from node_modules/kafkajs/package.json as Node resolves it",
		ReadsIdle:  true,
		Reads: Fact{Says: "every connection is a net.Socket with an 'end' handler (onEnd) that disconnects when the broker closes: Node's event loop reads all sockets",
			Source: Source{Repo: "tulios/kafkajs", Path: "src/network/connection.js, src/network/socket.js", Symbol: "Connection.connect onEnd", Commit: kafkajsTag}},
		IdleSetting: "", IdleDefault: 0,
		Idle: Fact{Says: "no idle timeout of its own: a connection stays open until the broker closes it",
			Source: Source{Repo: "tulios/kafkajs", Path: "src/network/connection.js", Commit: kafkajsTag}},
		Keepalive: Fact{Says: "socket.setKeepAlive(true, 60000): first probe after 60 s idle",
			Source: Source{Repo: "tulios/kafkajs", Path: "src/network/socketFactory.js", Symbol: "KEEP_ALIVE_DELAY", Commit: kafkajsTag}},
		CloseWait: "KafkaJS closes a connection when Node's event loop delivers the broker's FIN, so CLOSE_WAIT toward a broker means the event loop is blocked (CPU-bound or synchronous code) or the sockets are not KafkaJS's.",
		Fix:       "Keep synchronous work off the event loop (worker threads) and call producer.disconnect() on every producer you create.",
		Measured:  reproMeasured(KafkaJS),
	},
	{
		ID: KdiagProduce, Name: "kdiag's reference producer", Module: "github.com/kdiag/kdiag (kdiag produce)", Language: "Go",
		Recognized: "a process whose executable's Go build info names kdiag's main package (github.com/kdiag/kdiag/cmd/kdiag) and whose command line runs `kdiag produce` (kdiag repro's producer too); the reader, callbacks and connections.max.idle.ms from its --reader, --block-callbacks, --callback-delay, --set and --config, over the defaults of package producer",
		ReadsIdle:  true,
		Reads: Fact{Says: "with kdiag.reader=poll (the default, --reader poll) every connection has a reader goroutine reading at all times, as Java's Selector keeps every channel registered for OP_READ: the FIN is read at once and the network goroutine closes the socket",
			Source: Source{Repo: SelfRepo, Path: "producer/requests.go, producer/config.go", Symbol: "sender.reader, ReaderPoll"}},
		IdleSetting: "connections.max.idle.ms", IdleDefault: 540 * time.Second,
		Idle: Fact{Says: "connections.max.idle.ms default 540000, as Java's: the network goroutine closes a connection idle that long; a negative value never closes one, so the broker's idle close is a passive close",
			Source: Source{Repo: SelfRepo, Path: "producer/connections.go, producer/config.go", Symbol: "sender.checkConnections, DefaultConfig"}},
		Keepalive: Fact{Says: "dials with a zero net.Dialer: Go's default keepalive, first probe after 15 s idle, then every 15 s",
			Source: Source{Repo: SelfRepo, Path: "producer/connections.go", Symbol: "sender.connect (var d net.Dialer)"}},
		CloseWait: "kdiag's reference producer runs --reader poll, which reads every connection as Java does, so CLOSE_WAIT toward a broker means its network goroutine is stalled by its callbacks: --block-callbacks (until SIGUSR1) or --callback-delay / kdiag.callback.delay.ms, its stand-ins for a Java send callback that blocks the network thread.",
		Fix:       "This is kdiag's stand-in for a blocked Java network thread: release the callbacks with kill -USR1 PID, or run without --block-callbacks and --callback-delay (kdiag.callback.delay.ms). In a Java application the cure is the same: keep send callbacks and interceptors quick and move slow work off the network thread.",
		Measured: []Measurement{
			{Version: "this tree", Setup: "--reader poll", HoldsCloseWait: false, Result: "reads the broker's FIN and closes: no CLOSE_WAIT", How: selfMeasured},
		},
		Lifecycle: []VersionFact{
			{Topic: "callbacks", Fact: Fact{Says: "send callbacks run on the network goroutine, one after another, each after kdiag.callback.delay.ms; --block-callbacks blocks each until SIGUSR1: meanwhile no FIN is handled and no socket closed, with either reader",
				Source: Source{Repo: SelfRepo, Path: "producer/batches.go, internal/cmd/produce/produce.go", Symbol: "sender.complete, blocker"}}},
		},
		Variants: []Variant{{
			Setting: "kdiag.reader", Value: "on-demand", ReadsIdle: false,
			Reads: Fact{Says: "with kdiag.reader=on-demand (--reader on-demand) a connection is read only while a response is pending (its reader waits for the token each request gives), as Sarama, franz-go and kafka-go read: the FIN of an idle connection stays unread until the next request on it meets the closed peer",
				Source: Source{Repo: SelfRepo, Path: "producer/requests.go, producer/config.go", Symbol: "sender.reader, sender.request, ReaderOnDemand"}},
			CloseWait: "kdiag's reference producer runs --reader on-demand, which stands for Sarama, franz-go and kafka-go: it reads a connection only while a response is pending, so every connection the broker closes while idle stays in CLOSE_WAIT (Recv-Q 1: the FIN unread) until the next request on it.",
			Fix:       "kdiag's reference producer runs --reader on-demand, which stands for Sarama/franz-go/kafka-go and holds CLOSE_WAIT by design; use --reader poll, or set connections.max.idle.ms below the broker's (--set connections.max.idle.ms=N) so that it closes idle connections first.",
			Ends:      "its next request on the connection (the next send, every --interval, or a metadata refresh, every metadata.max.age.ms), which meets the closed peer, closes the socket and reconnects; or its idle expiry, connections.max.idle.ms after the last use, unless that is negative",
			Measured: []Measurement{
				{Version: "this tree", Setup: "--reader on-demand --set connections.max.idle.ms=-1", HoldsCloseWait: true, Result: "holds every connection the broker closed in CLOSE_WAIT (Recv-Q 1)", How: selfMeasured},
			},
		}},
	},
	{
		ID: Librdkafka, Name: "librdkafka", Module: "librdkafka.so (kcat, confluent-kafka-python, node-rdkafka, ...)", Language: "C",
		Recognized: "librdkafka in /proc/PID/maps; its version from the library's rd_kafka_version(); the binding from the executable or the other mapped modules",
		ReadsIdle:  true,
		Reads: Fact{Says: "a connected broker socket stays in the broker thread's poll set for POLLIN (rd_kafka_transport_poll_set after connect and in rd_kafka_transport_io_serve), so a FIN is read at once: the connection is closed and, when there is work, reconnected",
			Source: Source{Repo: "confluentinc/librdkafka", Path: "src/rdkafka_broker.c, src/rdkafka_transport.c", Symbol: "rd_kafka_broker_connect_done, rd_kafka_transport_io_serve", Commit: librdkafkaCommit}},
		IdleSetting: "connections.max.idle.ms", IdleDefault: 0,
		Idle: Fact{Says: "connections.max.idle.ms default 0: idle connections are never closed by the client",
			Source: Source{Repo: "confluentinc/librdkafka", Path: "CONFIGURATION.md", Symbol: "connections.max.idle.ms", Commit: librdkafkaCommit}},
		Keepalive: Fact{Says: "socket.keepalive.enable default false",
			Source: Source{Repo: "confluentinc/librdkafka", Path: "CONFIGURATION.md", Symbol: "socket.keepalive.enable", Commit: librdkafkaCommit}},
		CloseWait: "librdkafka reads every connection on its own broker threads, whether or not the application polls, so CLOSE_WAIT toward a broker is rarely librdkafka's: look for connections the program opens itself, or a broker thread (rdk:broker…) that is stuck.",
		Fix:       "Set connections.max.idle.ms below the broker's connections.max.idle.ms and socket.keepalive.enable=true so that idle connections are closed by the client; destroy every handle you create (rd_kafka_destroy, producer.flush() then drop it, Close()).",
		Rules:     []string{"KD104", "KD102"},
		Threads: &ThreadNames{Network: "rdk:broker", Instance: "rdk:main", Full: "rdk:main (one per handle), rdk:broker<id> (one per broker)",
			Fact: Fact{Says: "librdkafka names its main thread rdk:main and each broker thread rdk:broker<nodeid>", Source: Source{Repo: "confluentinc/librdkafka", Path: "src/rdkafka.c, src/rdkafka_broker.c", Symbol: "rd_kafka_set_thread_sysname", Commit: librdkafkaCommit}}},
		Measured: reproMeasured(Librdkafka),
	},
	{
		ID: Sarama, Name: "Sarama", Module: "github.com/IBM/sarama (formerly github.com/Shopify/sarama)", Language: "Go",
		Recognized: "the module in the Go build info of /proc/PID/exe, with its version",
		ReadsIdle:  false,
		Reads: Fact{Says: "Broker.responseReceiver reads only for the requests it has promised a response to (it ranges over b.responses), so nothing reads an idle connection",
			Source: Source{Repo: "IBM/sarama", Path: "broker.go", Symbol: "Broker.responseReceiver", Commit: saramaCommit}},
		IdleSetting: "", IdleDefault: 0,
		Idle: Fact{Says: "no idle-connection reaper: a broker connection stays open until a request on it fails",
			Source: Source{Repo: "IBM/sarama", Path: "broker.go, config.go", Commit: saramaCommit}},
		Keepalive: Fact{Says: "Config.Net.KeepAlive default 0, passed to net.Dialer: Go's default, first probe after 15 s idle, then every 15 s",
			Source: Source{Repo: "IBM/sarama", Path: "config.go", Symbol: "Config.Net.KeepAlive, getDialer", Commit: saramaCommit}},
		CloseWait: "Sarama neither reads idle connections nor closes them, so every connection the broker closes for idleness stays in CLOSE_WAIT (Recv-Q 1) until Sarama next sends on it: then the write fails, the broker is reopened and the request retried.",
		Fix:       "Sarama has no idle timeout to set: keep each broker connection busier than the broker's connections.max.idle.ms, or raise that; a count of CLOSE_WAIT above one per broker per client means clients created and not closed: Close() every SyncProducer/AsyncProducer and Client.",
		Ends:      "only Sarama's next request to that broker, which fails and reopens the connection: Sarama has no idle reaper, so the socket of a broker it does not send to stays for as long as the process runs",
		Measured:  reproMeasured(Sarama),
	},
}

// All returns the catalog sorted by ID. The libraries are shared: do not
// modify them.
func All() []*Library { return slices.Clone(catalog) }

// Lookup returns the library with the given ID.
func Lookup(id string) (*Library, bool) {
	for _, l := range catalog {
		if l.ID == id {
			return l, true
		}
	}
	return nil, false
}

// IdleDefaultString writes a library's idle default for people.
func (l *Library) IdleDefaultString() string {
	switch {
	case l.IdleSetting == "":
		return "none"
	case l.IdleDefault == 0:
		return "0 (disabled)"
	}
	return fmt.Sprintf("%s, %d ms", shortDuration(l.IdleDefault), l.IdleDefault.Milliseconds())
}

// shortDuration writes 30s, 9m, 1h30m: what people write, not 9m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, z) {
			s = strings.TrimSuffix(s, z[1:])
		}
	}
	return s
}
