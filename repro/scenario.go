// Package repro reproduces passive-close CLOSE_WAIT on demand: each scenario
// starts the embedded idle-closing broker (or uses a real cluster), runs the
// reference producer (`kdiag produce`) as a child process with the
// scenario's configuration, samples the child's TCP sockets every
// SampleInterval through netstat, and says what it saw.
//
// Scenarios are data (Catalog): their timers are written at real scale, in
// the terms of the Java client and the broker (broker connections.max.idle.ms
// 600000, client 540000, metadata.max.age.ms 300000), and each run scales
// them by BrokerIdle/10m, so that with the default scale (a 3 s broker idle)
// a scenario shows in seconds what takes a production client minutes.
// Everything a run reports, its description included (Scenario.Describe),
// is at the run's scale.
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
	// ExpectNoCloseWait: the client closes idle connections before the
	// broker does; no socket is ever seen in CLOSE_WAIT.
	ExpectNoCloseWait Expect = iota
	// ExpectBrokerClosesClientFollows: the broker closes idle connections
	// and the client closes its end at once: none is left in CLOSE_WAIT.
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
		return "no CLOSE_WAIT: the client closes idle connections first"
	case ExpectBrokerClosesClientFollows:
		return "the broker closes idle connections, the client closes at once: no CLOSE_WAIT left"
	case ExpectHeld:
		return "CLOSE_WAIT held to the end"
	case ExpectGrowth:
		return "connections and CLOSE_WAIT grow with the producers created"
	case ExpectWhileBlocked:
		return "CLOSE_WAIT while the callback blocks, none once it returns"
	}
	return fmt.Sprintf("Expect(%d)", int(e))
}

// Scenario is one reproduction: a producer configuration at real scale and
// what it is meant to show.
type Scenario struct {
	// Name is the argument of `kdiag repro NAME`.
	Name string
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
			Name:       "healthy",
			Shows:      "Java defaults: the client's connections.max.idle.ms ({client_idle}) is below the broker's ({broker_idle}), so the client closes idle connections first and no CLOSE_WAIT appears",
			Reader:     "poll",
			ClientIdle: 540 * time.Second,
			Interval:   800 * time.Second,
			Cause:      "the client closed its idle connections first",
			Expect:     ExpectNoCloseWait,
		},
		{
			Name:       "never-idle",
			Shows:      "connections.max.idle.ms=-1 with a Java-like client that reads every connection: the broker closes idle connections, the client sees the FIN at once, closes, and reconnects on its next send",
			Reader:     "poll",
			ClientIdle: -1,
			Interval:   800 * time.Second,
			Cause:      "the client reads every connection and closes on the broker's FIN",
			Expect:     ExpectBrokerClosesClientFollows,
		},
		{
			Name:       "passive-close",
			Shows:      "connections.max.idle.ms=-1 with a client that reads only while a response is pending (Sarama, franz-go, kafka-go): every connection the broker closes stays in CLOSE_WAIT until the client writes on it again",
			Reader:     "on-demand",
			ClientIdle: -1,
			Interval:   800 * time.Second,
			Cause:      "the client does not read idle connections, so it never sees the broker's FIN",
			Expect:     ExpectHeld,
		},
		{
			Name:               "leak",
			Shows:              "a new producer for every message, never closed (a Go client with no idle timeout): connections grow with every message, and each one the broker closes stays in CLOSE_WAIT",
			Reader:             "on-demand",
			ClientIdle:         -1,
			Interval:           200 * time.Second,
			ProducerPerMessage: true,
			Cause:              "producers are created per message and never closed",
			Expect:             ExpectGrowth,
		},
		{
			Name:           "stalled-callback",
			Shows:          "Java defaults, but a send callback blocks the network goroutine for longer than the broker's idle timeout ({broker_idle}): nothing reads the sockets meanwhile, so the broker's idle close leaves every connection in CLOSE_WAIT until the callback returns (kdiag releases it once they all are); then the client closes them",
			Reader:         "poll",
			ClientIdle:     540 * time.Second,
			Interval:       800 * time.Second,
			BlockCallbacks: true,
			Cause:          "a send callback blocked the network goroutine, so nothing read the broker's FIN until it returned",
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
// broker whose idle timeout is brokerIdle. Only the idle and metadata timers
// are scaled; request and delivery timeouts keep their real defaults.
func (s Scenario) Settings(brokerIdle time.Duration) map[string]string {
	idle := "-1"
	if s.ClientIdle >= 0 {
		idle = strconv.FormatInt(Scale(s.ClientIdle, brokerIdle).Milliseconds(), 10)
	}
	return map[string]string{
		"connections.max.idle.ms": idle,
		"metadata.max.age.ms":     strconv.FormatInt(Scale(RealMetadataMaxAge, brokerIdle).Milliseconds(), 10),
	}
}
