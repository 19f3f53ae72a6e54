package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// KD1xx: the connection lifecycle. These rules are why kdiag exists: a
// connection the client never closes on its own is closed by the broker (or a
// load balancer) instead, a passive close, and clients that do not read idle
// sockets keep such connections in CLOSE_WAIT.

var javaDialects = []config.Dialect{config.Java, config.Spring}
var libDialects = []config.Dialect{config.Librdkafka}

// javaInt returns the effective value of a Java integer key, parsed. ok
// is false for a value the client refuses (KD401, KD402 report it): the
// producer does not start, so what the value would do is moot.
func (v *fileView) javaInt(key string) (n int64, e config.Entry, set, ok bool) {
	val, e, set, ok := v.javaValue(key)
	if !ok {
		return 0, e, set, false
	}
	bits := 64
	s, found := javaSettingAt(key, v.version)
	if found && intBits(s.Type) > 0 {
		bits = intBits(s.Type)
	}
	n, err := parseJavaInt(val, bits)
	if err != nil {
		return 0, e, set, false // KD401 reports it
	}
	if found && set && checkJavaValue(e, s, v.dialect == config.Spring, v.version) != nil {
		return 0, e, set, false // out of the validator's range: KD402
	}
	return n, e, set, true
}

// libInt returns the effective value of a librdkafka integer property.
func (v *fileView) libInt(keys ...string) (n int64, e config.Entry, set, ok bool) {
	val, e, set, ok := v.libValue(keys...)
	if !ok {
		return 0, e, set, false
	}
	// As librdkafka reads it: (int)strtol(value, &end, 0).
	r := readLibInt(val)
	if !r.ok {
		return 0, e, set, false // KD401 reports it
	}
	return r.val, e, set, true
}

const (
	// librdkafkaAzureIdle is what librdkafka uses for connections.max.idle.ms
	// when it is left unset and the broker list contains "azure" (librdkafka
	// issue #3109: Azure's load balancer drops flows idle for 4 minutes).
	librdkafkaAzureIdle = 230000
)

var kd101 = &Rule{
	ID:       "KD101",
	Title:    "connections.max.idle.ms is negative: the client never closes idle connections",
	Severity: Warning,
	Category: "connection",
	Rationale: "A negative connections.max.idle.ms makes the Java client's Selector create no idle-expiry " +
		"manager, so the client never closes a connection for being idle. The broker does instead, after " +
		"its own connections.max.idle.ms (600000 ms by default): the client receives the FIN, a passive " +
		"close. The Java network thread reads every socket and closes its side on the next poll, but clients " +
		"that read only while a response is pending (Sarama, franz-go, kafka-go) or whose network thread is " +
		"blocked keep such sockets in CLOSE_WAIT, and they pile up.",
	Remediation: "Remove connections.max.idle.ms (the default 540000 closes idle connections a minute before " +
		"the broker does) or set it below the broker's connections.max.idle.ms.",
	Source:   "apache/kafka clients/src/main/java/org/apache/kafka/common/network/Selector.java (constructor: idleExpiryManager = connectionMaxIdleMs < 0 ? null : new IdleExpiryManager(...)); apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (CONNECTIONS_MAX_IDLE_MS_CONFIG: LONG, 9 * 60 * 1000, no validator); apache/kafka server/src/main/java/org/apache/kafka/network/SocketServerConfigs.java (broker CONNECTIONS_MAX_IDLE_MS_DEFAULT 10 * 60 * 1000)",
	Dialects: javaDialects,
	Check: func(p *Pass) {
		n, e, set, ok := p.view.javaInt("connections.max.idle.ms")
		if !ok || !set || n >= 0 {
			return
		}
		p.reportValue(e, 0, fmt.Sprintf("%s: %d disables idle-connection closing: the client never closes an idle "+
			"connection, so the broker closes it after %s and the client is left with a passive close (CLOSE_WAIT "+
			"in clients that do not read idle sockets)", name(e), n, brokerIdleText(p.view.brokerIdle)), "")
	},
}

func brokerIdleText(ms int64) string {
	if ms <= 0 {
		return "never (the broker's connections.max.idle.ms is negative too; only TCP keepalive or a middlebox ends it)"
	}
	return fmt.Sprintf("its connections.max.idle.ms (%d ms)", ms)
}

var kd102 = &Rule{
	ID:       "KD102",
	Title:    "connections.max.idle.ms is not below the broker's: the broker closes idle connections first",
	Severity: Warning,
	Category: "connection",
	Rationale: "The client's connections.max.idle.ms should be lower than the broker's so that the client, not " +
		"the broker, closes an idle connection (the Java default 540000 is \"a bit lower than the server " +
		"default (10 min), to avoid both client and server closing connection at same time\"). When it is " +
		"equal or higher, the broker closes every idle connection first. What that costs depends on the client. " +
		"The Java client's network thread keeps every connection registered for reads: measured with " +
		"kafka-clients 2.1.1 and 3.9.0 against kdiag broker --idle 3s, it read the broker's FIN within 0-59 ms and " +
		"closed its side, so no CLOSE_WAIT lasts; it then requested metadata and reconnected about every 3.3 s " +
		"while idle (9 connections in 20 s). So the cost is a reconnect per connection each idle period, with a " +
		"log line (NetworkClient's INFO \"Node N disconnected.\" from 3.x; DEBUG in 2.x), and a first request " +
		"after each quiet spell that waits for a new connection and its TLS/SASL handshake. librdkafka also reads " +
		"every socket and reconnects. " +
		"CLOSE_WAIT comes only where the FIN is not read: in clients that read a connection only while a response " +
		"is pending (Sarama, franz-go, kafka-go), or while a Java network thread is blocked (a slow callback: " +
		"kafka-clients kept every broker-closed socket in CLOSE_WAIT for the 27 s it was blocked, whatever " +
		"connections.max.idle.ms said). The broker's value is 600000 unless --broker-config or --broker-idle-ms " +
		"says otherwise.",
	Remediation: "Set connections.max.idle.ms below the broker's connections.max.idle.ms (e.g. 540000 against the " +
		"broker default 600000), or leave the Java default. It lowers the churn, not to zero: the Java Selector " +
		"closes at most one expired connection per poll, so the broker still closes some first (kafka-clients " +
		"3.9.0 with 2000 against the broker's 3000: the broker closed 7 of 8).",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (CONNECTIONS_MAX_IDLE_MS_CONFIG and its comment: \"a bit lower than the server default (10 min)\"); apache/kafka clients/src/main/java/org/apache/kafka/common/network/Selector.java (maybeCloseOldestConnection: one expired connection per poll); apache/kafka server/src/main/java/org/apache/kafka/network/SocketServerConfigs.java (CONNECTIONS_MAX_IDLE_MS_DEFAULT); confluentinc/librdkafka CONFIGURATION.md connections.max.idle.ms and src/rdkafka_conf.c rd_kafka_conf_finalize (the \"azure\" default)",
	Check: func(p *Pass) {
		v := p.view
		broker := v.brokerIdle
		if broker <= 0 {
			return // the broker never closes idle connections
		}
		var (
			n       int64
			e       config.Entry
			set, ok bool
			why     string
		)
		if v.dialect == config.Librdkafka {
			n, e, set, ok = v.libInt("connections.max.idle.ms")
			if ok && !set && brokerListMentionsAzure(v) {
				n, why = librdkafkaAzureIdle, " (librdkafka's value for broker lists containing \"azure\")"
			}
			if !ok || n <= 0 {
				return // 0 disables idle closing: KD104
			}
		} else {
			n, e, set, ok = v.javaInt("connections.max.idle.ms")
			if !ok || n <= 0 {
				return // KD101, KD103
			}
			if _, over := javaIdleOverflow(n); over {
				return // the client closes every connection at once: KD103
			}
		}
		if n < broker {
			return
		}
		msg := fmt.Sprintf("connections.max.idle.ms %d%s is not below the broker's connections.max.idle.ms (%d ms): the "+
			"broker closes idle connections first; %s", n, why, broker, passiveCloseCost(v, p.Options))
		fix := fmt.Sprintf("Set connections.max.idle.ms below %d (e.g. %d).", broker, suggestIdle(broker))
		if set {
			p.reportValue(e, 0, name(e)+": "+strings.TrimPrefix(msg, "connections.max.idle.ms "), fix)
			return
		}
		p.reportFile("connections.max.idle.ms", 0, msg+"; the file leaves it at the default", fix)
	},
}

// passiveCloseCost says what the broker's idle close costs the client the
// configuration is for: CLOSE_WAIT where the client does not read the FIN
// (Options.HoldsFIN), else the reconnects of a client that reads it.
func passiveCloseCost(v *fileView, o Options) string {
	switch {
	case o.HoldsFIN:
		return "this client reads a connection only while a response is pending, so each broker-closed socket stays in " +
			"CLOSE_WAIT until its next write or idle reaper"
	case v.dialect == config.Librdkafka:
		return "librdkafka sees the close at once and reconnects (no CLOSE_WAIT), logging a disconnect each time"
	}
	logLine := " and an INFO line \"Node N disconnected.\""
	if !v.version.AtLeast(3, 0) {
		logLine = "" // 2.x logs it at DEBUG
	}
	return "the Java client reads the FIN within milliseconds and closes its side (no CLOSE_WAIT while its network " +
		"thread polls): the cost is a reconnect per connection each idle period" + logLine + ", and a first request " +
		"after each quiet spell that waits for a new connection"
}

// suggestIdle proposes a client idle timeout a minute (or 10%) below the broker's.
func suggestIdle(broker int64) int64 {
	if broker > 120000 {
		return broker - 60000
	}
	return broker * 9 / 10
}

func brokerListMentionsAzure(v *fileView) bool {
	e, _, ok := v.getAny("bootstrap.servers", "metadata.broker.list")
	return ok && strings.Contains(strings.ToLower(e.Value), "azure")
}

// javaIdleOverflow is what the Java client's Selector makes of a huge
// connections.max.idle.ms: IdleExpiryManager keeps connectionsMaxIdleMs *
// 1000 * 1000 nanoseconds in a long and adds it to System.nanoTime() (the
// time since boot on Linux). Past 9223372036854 ms the product wraps
// (9223372036854775807 gives -1000000 ns), and near it the sum does: either
// way a connection's expiry time is before now, so it counts as idle at
// once. over says the value does that on a host up for less than 31 years
// (1e18 ns); nanos is the product as the long holds it.
func javaIdleOverflow(ms int64) (nanos int64, over bool) {
	nanos = ms * 1000 * 1000 // wraps as Java's long does
	if ms <= 0 {
		return nanos, false
	}
	return nanos, nanos/1000/1000 != ms || nanos <= 0 || nanos > math.MaxInt64-1e18
}

var kd103 = &Rule{
	ID:       "KD103",
	Title:    "connections.max.idle.ms is 0 or overflows: the Java client closes connections at the first quiet poll",
	Severity: Error,
	Category: "connection",
	Rationale: "With connections.max.idle.ms=0 the Java client's Selector still has an idle-expiry manager, with " +
		"a zero timeout: at the end of every poll it closes the least recently active connection if that " +
		"connection had no I/O event in the poll (its last activity is older than the poll's end-of-select " +
		"time). A connection is therefore closed at the first poll in which nothing arrives on it, even while " +
		"a request on it waits for its response; one connection is closed per poll. The producer keeps " +
		"reconnecting, fails in-flight requests with disconnects and retries them, and leaves TIME_WAIT " +
		"sockets behind. 0 does not mean \"disabled\" (that is librdkafka's meaning, and a negative value's " +
		"in Java). A huge value is worse: the manager keeps connections.max.idle.ms * 1000 * 1000 nanoseconds " +
		"in a long and adds System.nanoTime() to it, so from about 8223372036854 ms (292 years, less the host's " +
		"uptime) the arithmetic overflows (9223372036854775807 gives -1000000 ns) and every connection is expired " +
		"at once, even one with I/O in the same poll: measured against kdiag broker, kafka-clients 3.9.0 and 2.1.1 " +
		"with connections.max.idle.ms=9223372036854775807 (and 3.9.0 with 9223372036854) closed each connection " +
		"within 0-13 ms of opening it (\"About to close the idle connection ... idle for 0 millis\"), opened 20-23 " +
		"connections in about 20 s, sent no request and failed every send; 8000000000000 worked.",
	Remediation: "Remove connections.max.idle.ms to use the default 540000, or set a value below the broker's " +
		"connections.max.idle.ms (a negative value, not a huge one, is Java's \"never\").",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/network/Selector.java: " +
		"IdleExpiryManager (connectionsMaxIdleNanos = connectionsMaxIdleMs * 1000 * 1000), " +
		"IdleExpiryManager.pollExpiredConnection (expired when currentTimeNanos > lastActive + connectionsMaxIdleNanos), " +
		"poll() -> maybeCloseOldestConnection(endSelect), pollSelectionKeys -> idleExpiryManager.update(channel, endSelect)",
	Dialects: javaDialects,
	Check: func(p *Pass) {
		n, e, set, ok := p.view.javaInt("connections.max.idle.ms")
		if !ok || !set {
			return
		}
		if nanos, over := javaIdleOverflow(n); over {
			p.reportValue(e, 0, fmt.Sprintf("%s: %d overflows the client's idle arithmetic (Selector keeps it as %d * 1000000 = %d "+
				"ns in a long, added to System.nanoTime()): every connection counts as idle the moment it opens, and the "+
				"client closes it at the next poll, before any request gets through (kafka-clients 3.9.0 and 2.1.1 "+
				"reconnected about once a second and failed every send); Java's \"never\" is a negative value (KD101)", name(e), n, n, nanos), "")
			return
		}
		if n != 0 {
			return
		}
		p.reportValue(e, 0, name(e)+": 0 makes the Java client close a connection at the first poll without I/O on "+
			"it (even with a request in flight), so the producer reconnects over and over; 0 does not disable "+
			"idle closing in Java", "")
	},
}

var kd104 = &Rule{
	ID:       "KD104",
	Title:    "librdkafka never closes idle connections (connections.max.idle.ms=0): the broker does, with reconnects and error logs",
	Severity: Info,
	Category: "connection",
	Rationale: "librdkafka's connections.max.idle.ms defaults to 0, which disables idle closing (librdkafka picks " +
		"230000 by itself only when the broker list contains \"azure\"). The broker then closes every connection " +
		"idle for its own connections.max.idle.ms (600000 ms by default). librdkafka polls every broker socket, so " +
		"it sees that close at once and leaves no CLOSE_WAIT behind (kcat and confluent-kafka were seen against " +
		"kdiag broker to log \"Disconnected (after N ms in state UP)\" and reconnect): the cost is reconnect " +
		"churn, an error log line and error callback per broker each idle period (log.connection.close is on by " +
		"default), and a first request after each quiet spell that waits for a new connection and its TLS/SASL " +
		"handshake. Behind a load balancer or NAT that drops idle flows silently (Azure's after about 4 minutes), " +
		"a request on a dropped connection waits for a timeout instead. TCP keepalive (socket.keepalive.enable) " +
		"does not stop the broker's idle close.",
	Remediation: "Set connections.max.idle.ms below the broker's connections.max.idle.ms (e.g. 540000 against the " +
		"default 600000, 180000 behind Azure's load balancer), so that librdkafka closes idle connections itself, " +
		"quietly; or keep 0 and set log.connection.close=false if the reconnects are fine and only the logs are not.",
	Source: "confluentinc/librdkafka CONFIGURATION.md connections.max.idle.ms (0 .. 2147483647, default 0, " +
		"\"Disable with 0\") and log.connection.close (default true); src/rdkafka_conf.c rd_kafka_conf_finalize " +
		"(connections.max.idle.ms left unmodified and \"azure\" in the broker list: (4 * 60 - 10) * 1000, issue " +
		"#3109); src/rdkafka_broker.c rd_kafka_broker_fail (\"after %dms in state %s\")",
	Dialects: libDialects,
	Check: func(p *Pass) {
		v := p.view
		n, e, set, ok := v.libInt("connections.max.idle.ms")
		if !ok || n != 0 {
			return
		}
		if !set && brokerListMentionsAzure(v) {
			return // librdkafka picks 230000 by itself
		}
		msg := fmt.Sprintf("connections.max.idle.ms is 0 (librdkafka's default): librdkafka never closes idle "+
			"connections, so the broker closes each after %s; librdkafka sees it at once and reconnects "+
			"(no CLOSE_WAIT), logging a disconnect each time", brokerIdleText(v.brokerIdle))
		if set {
			p.reportValue(e, 0, name(e)+": 0 disables idle closing: "+strings.TrimPrefix(msg, "connections.max.idle.ms is 0 (librdkafka's default): "), "")
			return
		}
		p.reportFile("connections.max.idle.ms", 0, msg, "")
	},
}

var kd107 = &Rule{
	ID:       "KD107",
	Title:    "reconnect.backoff.max.ms is below reconnect.backoff.ms: librdkafka refuses the configuration",
	Severity: Error,
	Category: "connection",
	Rationale: "librdkafka checks the two reconnect backoffs when it creates the client and fails with " +
		"\"`reconnect.backoff.max.ms` must be >= `reconnect.backoff.ms`\": the producer is not created. The " +
		"defaults are 100 and 10000; setting reconnect.backoff.ms above 10000 without raising the maximum is " +
		"enough to hit it. (The Java client takes such values and uses the maximum as a cap.)",
	Remediation: "Set reconnect.backoff.max.ms to at least reconnect.backoff.ms, or lower reconnect.backoff.ms.",
	Source:      "confluentinc/librdkafka src/rdkafka_conf.c rd_kafka_conf_finalize (reconnect_backoff_max_ms < reconnect_backoff_ms)",
	Dialects:    libDialects,
	Check: func(p *Pass) {
		v := p.view
		lo, loE, loSet, ok1 := v.libInt("reconnect.backoff.ms")
		hi, hiE, hiSet, ok2 := v.libInt("reconnect.backoff.max.ms")
		if !ok1 || !ok2 || (!loSet && !hiSet) || hi >= lo {
			return
		}
		at, what := hiE, fmt.Sprintf("%s: %d is below reconnect.backoff.ms (%d", name(hiE), hi, lo)
		if !loSet {
			what += ", its default"
		}
		if !hiSet {
			at, what = loE, fmt.Sprintf("%s: %d is above reconnect.backoff.max.ms (%d, its default", name(loE), lo, hi)
		}
		p.reportValue(at, 0, what+"): librdkafka fails with \"`reconnect.backoff.max.ms` must be >= `reconnect.backoff.ms`\"", "")
	},
}

var kd105 = &Rule{
	ID:       "KD105",
	Title:    "reconnect.backoff.ms is set without reconnect.backoff.max.ms: exponential backoff is disabled",
	Severity: Warning,
	Category: "connection",
	Rationale: "When reconnect.backoff.ms is set and reconnect.backoff.max.ms is not, the Java client sets " +
		"reconnect.backoff.max.ms to reconnect.backoff.ms and logs \"Disabling exponential reconnect backoff " +
		"because reconnect.backoff.ms is set, but reconnect.backoff.max.ms is not.\" Every client then retries " +
		"a down broker at the same fixed interval, with no growth, which turns a broker restart into a " +
		"reconnect storm.",
	Remediation: "Also set reconnect.backoff.max.ms (the default is 1000), or remove reconnect.backoff.ms.",
	Source:      "apache/kafka clients/src/main/java/org/apache/kafka/clients/CommonClientConfigs.java (postProcessReconnectBackoffConfigs: \"Disabling exponential reconnect backoff because reconnect.backoff.ms is set, but reconnect.backoff.max.ms is not.\")",
	Dialects:    javaDialects,
	Check: func(p *Pass) {
		e, ok := p.view.get("reconnect.backoff.ms")
		if !ok {
			return
		}
		if _, ok := p.view.get("reconnect.backoff.max.ms"); ok {
			return
		}
		val := strings.TrimSpace(e.Value)
		p.reportKey(e, 0, fmt.Sprintf("%s is set but reconnect.backoff.max.ms is not: the Java client sets "+
			"reconnect.backoff.max.ms to %s too, which disables exponential reconnect backoff", name(e), val),
			fmt.Sprintf("Add reconnect.backoff.max.ms (e.g. reconnect.backoff.max.ms=1000, or 10000 for large fleets) next to reconnect.backoff.ms=%s.", val))
	},
}

const (
	metadataLowMS  = 10000
	metadataHighMS = 1800000
)

var kd106 = &Rule{
	ID:       "KD106",
	Title:    "metadata refresh interval at an extreme (below 10 s or above 30 min, or disabled)",
	Severity: Warning,
	Category: "connection",
	Rationale: "The Java client refreshes metadata every metadata.max.age.ms (default 300000) even when nothing " +
		"has changed; librdkafka does so every topic.metadata.refresh.interval.ms (default 300000; its " +
		"metadata.max.age.ms is a cache age, not the refresh period). Below 10000 ms every producer sends a " +
		"METADATA request several times a minute (a metadata storm across a fleet, and connections that " +
		"never go idle). Above 1800000 ms (30 minutes), or disabled (-1 in librdkafka), a producer that sees " +
		"no errors learns of new brokers, partitions and moved leaders late. kdiag's thresholds (10 s, 30 min) " +
		"are judgement, not limits of the clients.",
	Remediation: "Keep the refresh period between 10000 and 1800000 ms; the default 300000 suits most producers.",
	Source: "apache/kafka ProducerConfig METADATA_MAX_AGE_CONFIG (LONG, 5 * 60 * 1000, atLeast(0)); " +
		"confluentinc/librdkafka CONFIGURATION.md topic.metadata.refresh.interval.ms (-1 .. 3600000, default 300000, " +
		"\"Use -1 to disable the intervalled refresh (not recommended)\") and metadata.max.age.ms",
	Check: func(p *Pass) {
		v := p.view
		key := "metadata.max.age.ms"
		var (
			n       int64
			e       config.Entry
			set, ok bool
		)
		if v.dialect == config.Librdkafka {
			key = "topic.metadata.refresh.interval.ms"
			n, e, set, ok = v.libInt(key)
		} else {
			n, e, set, ok = v.javaInt(key)
		}
		if !ok || !set {
			return
		}
		switch {
		case n < 0 && v.dialect == config.Librdkafka:
			p.reportValue(e, 0, name(e)+": -1 disables the periodic metadata refresh: the producer learns of new "+
				"brokers, partitions and leaders only from errors", "")
		case n < metadataLowMS:
			p.reportValue(e, 0, fmt.Sprintf("%s: %d ms refreshes metadata %s: a metadata storm across many "+
				"producers", name(e), n, perMinute(n)), "")
		case n > metadataHighMS:
			p.reportValue(e, 0, fmt.Sprintf("%s: %d ms (%s) between metadata refreshes: new brokers and "+
				"partitions stay unseen, and moved leaders are found only through errors", name(e), n, minutes(n)), "")
		}
	},
}

func perMinute(ms int64) string {
	if ms <= 0 {
		return "continuously"
	}
	return fmt.Sprintf("%d times a minute", 60000/ms)
}

func minutes(ms int64) string {
	return fmt.Sprintf("%d min", ms/60000)
}

// backoffPair is a base value and the maximum the Java client grows it to:
// ExponentialBackoff(initial, 2, max, jitter) starts from min(max, initial),
// so a maximum below the base value is used as a static value.
type backoffPair struct {
	base, max string
	// warns says the client logs that (CommonClientConfigs
	// .warnDisablingExponentialBackoff), and what it calls the value.
	warns bool
	what  string
}

var backoffPairs = []backoffPair{
	{"reconnect.backoff.ms", "reconnect.backoff.max.ms", false, "reconnect backoff"},
	{"retry.backoff.ms", "retry.backoff.max.ms", true, "backoff"},
	{"socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", true, "connection setup timeout"},
}

// staticBackoff is the value the Java client of version ver uses for a pair
// whose maximum hi is below its base lo. Since 3.7 ExponentialBackoff
// starts from min(max, base): hi. From 2.7 to 3.6 it started from the base
// and, with expMax 0, stayed there: lo. Before 2.7 ClusterConnectionStates
// computed the reconnect backoff as base * 2^min(failures-1,
// log2(max/base)), which a maximum below the base brings down to it: hi.
func staticBackoff(bp backoffPair, ver Version, lo, hi int64) int64 {
	switch {
	case ver.AtLeast(3, 7):
		return hi
	case bp.base == "reconnect.backoff.ms" && !ver.AtLeast(2, 7):
		return hi
	}
	return lo
}

var kd108 = &Rule{
	ID:       "KD108",
	Title:    "a *.max.ms below its base value: the Java client applies the maximum as a static value",
	Severity: Warning,
	Category: "connection",
	Rationale: "reconnect.backoff.ms, retry.backoff.ms and socket.connection.setup.timeout.ms grow exponentially, up to " +
		"their *.max.ms. The Java client builds each as ExponentialBackoff(base, 2, max, jitter), whose first value is " +
		"min(max, base) (3.7 and later) and which stays there when max is below base: the maximum is used as a static " +
		"value, and the base value the file sets has no effect. (From 2.7 to 3.6 ExponentialBackoff started from the " +
		"base and stayed there instead, and before 2.7 the reconnect backoff came down to the maximum: the message " +
		"says which value the selected version applies.) For retry.backoff.ms and socket.connection.setup.timeout.ms " +
		"the client logs a WARN (\"... is greater than configuration ... A static backoff with value ... will be " +
		"applied.\"); for reconnect.backoff.ms it says nothing. The *.max.ms keys have no validator, so a negative " +
		"socket.connection.setup.timeout.max.ms (-1) is taken: the static setup timeout is then negative, and a " +
		"connection still being set up when the client next checks is timed out (on loopback, where a connection " +
		"completes within the poll that starts it, kafka-clients 3.9.0 with -1 connected and sent normally). " +
		"(librdkafka refuses reconnect.backoff.max.ms below reconnect.backoff.ms: KD107.)",
	Remediation: "Set the *.max.ms at or above its base value, or remove the one you did not mean to set.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/utils/ExponentialBackoff.java (initialInterval = " +
		"Math.min(maxInterval, initialInterval); expMax 0 when maxInterval <= initialInterval); " +
		"clients/src/main/java/org/apache/kafka/clients/CommonClientConfigs.java (warnDisablingExponentialBackoff, 3.7 and " +
		"later); clients/ClusterConnectionStates.java (reconnect backoff and connection setup timeout) and " +
		"producer/internals/RecordAccumulator.java (retry backoff)",
	Dialects: javaDialects,
	Check: func(p *Pass) {
		v := p.view
		for _, bp := range backoffPairs {
			lo, loE, loSet, ok1 := v.javaInt(bp.base)
			hi, hiE, hiSet, ok2 := v.javaInt(bp.max)
			if !ok1 || !ok2 || (!loSet && !hiSet) || hi >= lo {
				continue
			}
			if bp.base == "reconnect.backoff.ms" && !hiSet {
				continue // the client sets the max to the base: KD105
			}
			at, msg := hiE, fmt.Sprintf("%s: %d is below %s (%d", name(hiE), hi, bp.base, lo)
			if !loSet {
				msg += ", its default"
			}
			if !hiSet {
				at, msg = loE, fmt.Sprintf("%s: %d is above %s (%d, its default", name(loE), lo, bp.max, hi)
			}
			applied := staticBackoff(bp, v.version, lo, hi)
			msg += fmt.Sprintf("): the client applies %d ms as a static %s", applied, bp.what)
			if bp.warns && v.version.AtLeast(3, 7) {
				msg += " and logs a WARN saying so"
			} else {
				msg += ", silently"
			}
			if applied < 0 {
				msg += fmt.Sprintf("; a negative %s times out what is still under way at the client's next check", bp.what)
			}
			p.reportValue(at, 0, msg, "")
		}
	},
}
