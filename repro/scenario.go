// Package repro reproduces passive-close CLOSE_WAIT on demand, and says
// what a client does with the broker's idle close.
//
// Scenarios (Catalog, Run) start the embedded idle-closing broker (or use a
// real cluster), run the reference producer (`kdiag produce`, the model of
// kafka-clients 3.9.0) as a child process with the scenario's
// configuration, sample the child's TCP sockets every SampleInterval
// through netstat, and say what they saw. Their timers are written at real
// scale, in the terms of the Java client and the broker (broker
// connections.max.idle.ms 600000, client 540000, metadata.max.age.ms
// 300000), and each run scales them by BrokerIdle/10m, so that with the
// default scale (a 3 s broker idle) a scenario shows in seconds what takes
// a production client minutes. request.timeout.ms is not scaled (see
// Scenario.Settings). Everything a run reports, its description included
// (Scenario.Describe), is at the run's scale.
//
// RunCommand (`kdiag repro -- CMD`) runs the user's own program against
// the embedded cluster instead, follows it and its children, drives the
// broker's idle closes, and says, close by close, what the program did.
package repro

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/human"
)

// RealBrokerIdle is the broker's default connections.max.idle.ms (600000):
// the time every scenario timer is scaled against.
const RealBrokerIdle = 10 * time.Minute

// RealMetadataMaxAge is the client's default metadata.max.age.ms (300000).
const RealMetadataMaxAge = 5 * time.Minute

// Expect is what a scenario is meant to show; Result.AsExpected checks the
// observation against it.
type Expect int

// What the scenarios show.
const (
	// ExpectNoCloseWait: idle connections end, closed by the client (its
	// idle timeout) or by the broker, whose FIN the client reads at once:
	// no socket stays in CLOSE_WAIT for AtOnce or longer.
	ExpectNoCloseWait Expect = iota
	// ExpectBrokerClosesClientFollows: the broker closes idle connections
	// and the client closes its end at once: none stays in CLOSE_WAIT for
	// AtOnce or longer.
	ExpectBrokerClosesClientFollows
	// ExpectHeld: connections the broker closed stay in CLOSE_WAIT to the end.
	ExpectHeld
	// ExpectGrowth: connections and CLOSE_WAIT grow with the messages sent.
	ExpectGrowth
	// ExpectWhileBlocked: CLOSE_WAIT appears while a callback blocks the
	// client's network goroutine, and is gone once it returns.
	ExpectWhileBlocked
)

// String says what is expected, in the report's words.
func (e Expect) String() string {
	switch e {
	case ExpectNoCloseWait:
		return "no CLOSE_WAIT held: the client closes idle connections itself, or reads the broker's FIN at once"
	case ExpectBrokerClosesClientFollows:
		return "the broker closes idle connections, the client reads the FIN and closes at once: no CLOSE_WAIT held"
	case ExpectHeld:
		return "CLOSE_WAIT held to the end"
	case ExpectGrowth:
		return "connections and CLOSE_WAIT grow with the producers created"
	case ExpectWhileBlocked:
		return "CLOSE_WAIT while the callback blocks, none once it returns"
	}
	return fmt.Sprintf("Expect(%d)", int(e))
}

// AtOnce is how soon after the broker's FIN a client must close its socket
// for the close to count as "at once", not as CLOSE_WAIT held: the real
// Java client took 0-59 ms (../shared/java-clients/README.md); the rest is
// room for a busy machine. A socket sampled in CLOSE_WAIT younger than
// this, then gone, was read and closed at once.
const AtOnce = time.Second

// Scenario is one reproduction: a producer configuration at real scale and
// what it is meant to show.
type Scenario struct {
	// Name is the argument of `kdiag repro NAME`.
	Name string
	// StandsFor names the real clients whose behaviour the scenario's
	// producer follows (its reader and configuration): the Java client's
	// scenarios are checked against kafka-clients 3.9.0, the others
	// against the Go clients they name (clients/repro_test.go).
	StandsFor string
	// Shows says, for an SRE, what the scenario demonstrates. {broker_idle}
	// and {client_idle} stand for the scaled timeouts (Describe).
	Shows string
	// Reader is the producer's --reader: "poll" (a reader on every
	// connection, as the Java client) or "on-demand" (reads only while a
	// response is pending, as Sarama, franz-go and kafka-go).
	Reader string
	// ClientIdle is the client's connections.max.idle.ms at real scale; a
	// negative value is -1 (never close idle connections).
	ClientIdle time.Duration
	// Interval is the time between messages at real scale.
	Interval time.Duration
	// BlockCallbacks makes the producer's send callbacks block its network
	// goroutine (kdiag produce --block-callbacks) until the run has seen
	// every connection in CLOSE_WAIT and held them for a while; the run
	// then releases them (SIGUSR1) and waits for the client to close them.
	// The stall is driven by what the run observes, not by a timer that
	// would race the broker's idle close.
	BlockCallbacks bool
	// ProducerPerMessage creates a new producer for each message and never
	// closes it (the leak).
	ProducerPerMessage bool
	// Cause explains, in a verdict, why CLOSE_WAIT is held.
	Cause string
	// Expect is what the run should show.
	Expect Expect
}

// Catalog returns the scenarios in the order `kdiag repro` runs them.
func Catalog() []Scenario {
	return []Scenario{
		{
			Name:      "healthy",
			StandsFor: "kafka-clients 3.9.0 with its defaults, network thread polling",
			Shows: "the Java client's defaults: connections.max.idle.ms ({client_idle}) below the broker's ({broker_idle}). " +
				"The client closes an idle connection only when a poll ends, at most one per poll, and its polls do not wait for the idle deadline: " +
				"it closes those whose deadline a poll passes before the broker's, and the broker closes the others first. It reads each FIN at once and closes, " +
				"then fetches metadata and reconnects (reconnect churn): no CLOSE_WAIT",
			Reader:     "poll",
			ClientIdle: 540 * time.Second,
			Interval:   800 * time.Second,
			Cause:      "a client that reads every connection holds none unless its network thread stalls (a busy machine?)",
			Expect:     ExpectNoCloseWait,
		},
		{
			Name:      "never-idle",
			StandsFor: "kafka-clients 3.9.0 with connections.max.idle.ms=-1, network thread polling",
			Shows: "the Java client with connections.max.idle.ms=-1: it never closes an idle connection, the broker closes them all; " +
				"it reads each FIN at once, closes, and reconnects for its next metadata request or send (reconnect churn): no CLOSE_WAIT",
			Reader:     "poll",
			ClientIdle: -1,
			Interval:   800 * time.Second,
			Cause:      "a client that reads every connection holds none unless its network thread stalls (a busy machine?)",
			Expect:     ExpectBrokerClosesClientFollows,
		},
		{
			Name:      "passive-close",
			StandsFor: "Sarama, franz-go and kafka-go (not the Java client, which reads every connection)",
			Shows: "a client that reads a connection only while a response is pending, as Sarama, franz-go and kafka-go do, " +
				"with no idle timeout of its own (connections.max.idle.ms=-1): every connection the broker closes stays in CLOSE_WAIT " +
				"until the client writes on it again; one it never uses again (the bootstrap connection) stays to the end",
			Reader:     "on-demand",
			ClientIdle: -1,
			Interval:   800 * time.Second,
			Cause:      "the client does not read idle connections, so it never sees the broker's FIN",
			Expect:     ExpectHeld,
		},
		{
			Name:      "leak",
			StandsFor: "a Go client (Sarama, franz-go, kafka-go) created for every message and never closed",
			Shows: "a new producer for every message, never closed, of a client that does not read idle connections and has no idle timeout: " +
				"connections grow with every message, and each one the broker closes stays in CLOSE_WAIT",
			Reader:             "on-demand",
			ClientIdle:         -1,
			Interval:           200 * time.Second,
			ProducerPerMessage: true,
			Cause:              "producers are created per message and never closed",
			Expect:             ExpectGrowth,
		},
		{
			Name:      "stalled-callback",
			StandsFor: "kafka-clients 3.9.0 whose send callback (or interceptor) blocks the network thread",
			Shows: "the Java client's defaults, but a send callback blocks the network thread for longer than the broker's idle timeout ({broker_idle}): " +
				"nothing reads the sockets meanwhile, so every connection the broker closes stays in CLOSE_WAIT until the callback returns " +
				"(kdiag releases it once they all are; connections.max.idle.ms below the broker's does not help while it blocks); then the client closes them",
			Reader:         "poll",
			ClientIdle:     540 * time.Second,
			Interval:       800 * time.Second,
			BlockCallbacks: true,
			Cause:          "a send callback blocked the network thread, so nothing read the broker's FIN until it returned",
			Expect:         ExpectWhileBlocked,
		},
	}
}

// Describe is Shows at the scale of a run whose broker closes idle
// connections after brokerIdle: the timeouts it names are the ones the run
// uses, as every other figure of the run is.
func (s Scenario) Describe(brokerIdle time.Duration) string {
	client := "-1 (never)"
	if s.ClientIdle >= 0 {
		client = human.Age(Scale(s.ClientIdle, brokerIdle))
	}
	return strings.NewReplacer("{broker_idle}", human.Age(brokerIdle), "{client_idle}", client).Replace(s.Shows)
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Catalog() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names lists the scenario names in catalog order.
func Names() []string {
	var out []string
	for _, s := range Catalog() {
		out = append(out, s.Name)
	}
	return out
}

// Scale maps a real-scale duration to a run whose broker closes idle
// connections after brokerIdle: d * brokerIdle / 10m, rounded to the
// millisecond (the unit of Kafka's *.ms settings).
func Scale(d, brokerIdle time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	s := time.Duration(float64(d) * float64(brokerIdle) / float64(RealBrokerIdle))
	return max(s.Round(time.Millisecond), time.Millisecond)
}

// Settings returns the producer properties the scenario runs with against a
// broker whose idle timeout is brokerIdle. The idle and metadata timers are
// scaled. request.timeout.ms is not, and is set to its default, 30000, so
// that the configuration shown is the one that ran: it also bounds how long
// the Java client's network thread waits in a poll (NetworkClient.poll
// waits at most the least of it and the metadata and telemetry timers), so
// at real scale the client looks for expired idle connections at least
// every 30 s, half the minute between its idle timeout and the broker's;
// scaled (150 ms at the default scale) requests would time out on a busy
// machine (kafka-clients 3.9.0 at request.timeout.ms=150, load 18-25: 12
// requests timed out in 12 s). So at scale the poll waits up to
// metadata.max.age.ms, and the client closes fewer idle connections itself
// before the broker does than it would at real scale (RequestTimeoutNote).
func (s Scenario) Settings(brokerIdle time.Duration) map[string]string {
	idle := "-1"
	if s.ClientIdle >= 0 {
		idle = strconv.FormatInt(Scale(s.ClientIdle, brokerIdle).Milliseconds(), 10)
	}
	return map[string]string{
		"connections.max.idle.ms": idle,
		"metadata.max.age.ms":     strconv.FormatInt(Scale(RealMetadataMaxAge, brokerIdle).Milliseconds(), 10),
		"request.timeout.ms":      strconv.FormatInt(RealRequestTimeout.Milliseconds(), 10),
	}
}

// RealRequestTimeout is the client's request.timeout.ms default (30000),
// which scenarios keep unscaled (Settings).
const RealRequestTimeout = 30 * time.Second

// RequestTimeoutNote says, for help and reports, why request.timeout.ms is
// not scaled and what that changes.
const RequestTimeoutNote = "request.timeout.ms keeps its real 30s: scaled down (150ms at --scale 200), requests time out on a busy machine. " +
	"It also bounds the Java client's poll, whose end is when it closes an expired idle connection (one per poll): " +
	"at real scale the client looks at least every 30s, half the minute between its 9m idle timeout and the broker's 10m, " +
	"and closes most idle connections itself; at scale it looks only when metadata.max.age.ms or an event wakes it, " +
	"so the broker closes more of them first than it would at real scale"
