package producer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/rules"
)

// ReaderMode says how a connection meets the broker's FIN (see the package
// documentation).
type ReaderMode int

// Reader modes.
const (
	// ReaderPoll keeps a reader on every connection at all times, as the Java
	// client's Selector keeps every channel registered for OP_READ: a FIN is
	// seen at once and the socket is closed.
	ReaderPoll ReaderMode = iota
	// ReaderOnDemand reads only while a response is pending, as Sarama,
	// franz-go and kafka-go do: a FIN on an idle connection is not seen until
	// the next request on it, so the socket stays in CLOSE_WAIT until then.
	ReaderOnDemand
)

// String returns the mode as kdiag.reader spells it.
func (m ReaderMode) String() string {
	if m == ReaderOnDemand {
		return "on-demand"
	}
	return "poll"
}

// ParseReaderMode reads a kdiag.reader / --reader value.
func ParseReaderMode(s string) (ReaderMode, error) {
	switch strings.TrimSpace(s) {
	case "poll":
		return ReaderPoll, nil
	case "on-demand", "ondemand":
		return ReaderOnDemand, nil
	}
	return ReaderPoll, fmt.Errorf("%q is not a reader mode (want poll or on-demand)", s)
}

// Config is the producer's configuration. Field names follow the Java
// client's keys (ProducerConfig); defaults are kafka-clients 3.9.0's (what
// its ProducerConfig logs at start), and enable.idempotence's is the
// model's (true at 3.9.0, false at 2.1.1).
type Config struct {
	// BootstrapServers is bootstrap.servers: host:port pairs, nodes -1, -2, ...
	BootstrapServers []string
	// ClientID is client.id, sent in every request header.
	ClientID string
	// Acks is acks: -1 (all), 0 or 1.
	Acks int16
	// Linger is linger.ms (0 at 2.1.1 and 3.9.0; 4.0 made it 5 ms).
	Linger time.Duration
	// BatchSize is batch.size in bytes (0 is treated as 1, as Java does).
	BatchSize int
	// BufferMemory is buffer.memory: Send blocks while this many bytes are
	// buffered, for up to MaxBlock.
	BufferMemory int64
	// MaxBlock is max.block.ms: how long Send waits for buffer space.
	MaxBlock time.Duration
	// MaxRequestSize is max.request.size: the largest record accepted and the
	// cap on one Produce request's batches.
	MaxRequestSize int
	// RequestTimeout is request.timeout.ms: a request without a response
	// after this long disconnects its node, as NetworkClient does.
	RequestTimeout time.Duration
	// DeliveryTimeout is delivery.timeout.ms: a record not acknowledged this
	// long after Send fails, retries or not.
	DeliveryTimeout time.Duration
	// Retries is retries.
	Retries int
	// RetryBackoff and RetryBackoffMax are retry.backoff.ms and
	// retry.backoff.max.ms (exponential between them).
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// MaxInFlight is max.in.flight.requests.per.connection.
	MaxInFlight int
	// MetadataMaxAge is metadata.max.age.ms: metadata is refreshed this often.
	MetadataMaxAge time.Duration
	// ConnectionsMaxIdle is connections.max.idle.ms; negative: the producer
	// never closes an idle connection (Java creates no IdleExpiryManager).
	ConnectionsMaxIdle time.Duration
	// ReconnectBackoff and ReconnectBackoffMax are reconnect.backoff.ms and
	// reconnect.backoff.max.ms.
	ReconnectBackoff    time.Duration
	ReconnectBackoffMax time.Duration
	// SocketConnectionSetupTimeout is socket.connection.setup.timeout.ms:
	// how long a connection attempt may take before it is closed, the first
	// value of an exponential backoff (x2 per attempt in a row that failed
	// while connecting, 20% jitter) up to SocketConnectionSetupTimeoutMax,
	// as ClusterConnectionStates does. Like Java it may be 0 or negative
	// (neither key has a validator): every attempt's timeout is then 0 or
	// less, and an attempt still connecting when the network goroutine next
	// wakes is dropped (NetworkClient.handleTimedOutConnections).
	SocketConnectionSetupTimeout time.Duration
	// SocketConnectionSetupTimeoutMax is
	// socket.connection.setup.timeout.max.ms; below
	// SocketConnectionSetupTimeout it is the constant timeout (Java's
	// ExponentialBackoff takes the smaller as its start).
	SocketConnectionSetupTimeoutMax time.Duration
	// CompressionType is compression.type: none, gzip, snappy, lz4 or zstd.
	CompressionType string
	// EnableIdempotence is enable.idempotence: with it the producer gets a
	// producer ID (INIT_PRODUCER_ID) before its first PRODUCE and numbers
	// its batches. The default is the model's: true at 3.9.0, false at
	// 2.1.1 (which sends no INIT_PRODUCER_ID at all).
	EnableIdempotence bool
	// AllowAutoTopicCreation is allow.auto.create.topics: sent in METADATA.
	AllowAutoTopicCreation bool
	// Reader is kdiag.reader: poll or on-demand.
	Reader ReaderMode
	// Model is kdiag.model: which kafka-clients version's network
	// behaviour the producer follows (java-3.9, the default, or java-2.1).
	Model Model
	// CallbackDelay is kdiag.callback.delay.ms: every send callback sleeps
	// this long on the network goroutine before the user's callback runs.
	CallbackDelay time.Duration
	// Ignored lists the keys ParseConfig did not use, sorted (New logs them
	// at debug level; kdiag lint is the place to check them).
	Ignored []string
}

// DefaultConfig returns the defaults (no bootstrap servers).
func DefaultConfig() Config {
	return Config{
		Acks:                            -1,
		Linger:                          0,
		BatchSize:                       16384,
		BufferMemory:                    33554432,
		MaxBlock:                        60 * time.Second,
		MaxRequestSize:                  1048576,
		RequestTimeout:                  30 * time.Second,
		DeliveryTimeout:                 120 * time.Second,
		Retries:                         math.MaxInt32,
		RetryBackoff:                    100 * time.Millisecond,
		RetryBackoffMax:                 time.Second,
		MaxInFlight:                     5,
		MetadataMaxAge:                  300 * time.Second,
		ConnectionsMaxIdle:              540 * time.Second,
		ReconnectBackoff:                50 * time.Millisecond,
		ReconnectBackoffMax:             time.Second,
		SocketConnectionSetupTimeout:    10 * time.Second,
		SocketConnectionSetupTimeoutMax: 30 * time.Second,
		CompressionType:                 "none",
		EnableIdempotence:               true,
		AllowAutoTopicCreation:          true,
		Reader:                          ReaderPoll,
	}
}

// Keys kdiag defines on top of the Java client's.
const (
	KeyReader        = "kdiag.reader"
	KeyModel         = "kdiag.model"
	KeyCallbackDelay = "kdiag.callback.delay.ms"
)

// ParseConfig builds a Config from properties (key to value, as
// config.File.Map returns them). A bad value is an error naming the key, the
// value and what is expected; for a key of the Java client it is the message
// kdiag lint reports for the same value (rules.CheckJavaValue). Unknown keys
// land in Config.Ignored, unchecked: kdiag lint is the place to check them.
func ParseConfig(props map[string]string) (Config, error) {
	return parseConfig(props, func(key string) string { return "" })
}

// parseConfig is ParseConfig with where(key) prefixed to each problem
// (LoadConfig: "producer.properties:12: ").
func parseConfig(props map[string]string, where func(key string) string) (Config, error) {
	c := DefaultConfig()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []string
	for _, k := range keys {
		if !keySet[k] {
			c.Ignored = append(c.Ignored, k)
			continue
		}
		// The catalog's type and validator first, so that a value kdiag
		// lint reports is refused here in the same words; c.set adds what
		// the producer needs on top and converts.
		err := rules.CheckJavaValue(k, props[k])
		if err == nil {
			err = c.set(k, props[k])
		}
		// set reports each bad bootstrap server on its own (errors.Join).
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				errs = append(errs, where(k)+e.Error())
			}
		} else if err != nil {
			errs = append(errs, where(k)+err.Error())
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if _, ok := props["enable.idempotence"]; !ok {
		c.EnableIdempotence = c.Model == ModelJava39
	}
	// Java: setting reconnect.backoff.ms without reconnect.backoff.max.ms
	// makes the backoff static at the set value
	// (CommonClientConfigs.postValidateReconnectBackoffConfigs).
	if _, ok := props["reconnect.backoff.ms"]; ok {
		if _, ok := props["reconnect.backoff.max.ms"]; !ok {
			c.ReconnectBackoffMax = c.ReconnectBackoff
		}
	}
	if c.RetryBackoff > c.RetryBackoffMax {
		c.RetryBackoffMax = c.RetryBackoff
	}
	if c.ReconnectBackoff > c.ReconnectBackoffMax {
		c.ReconnectBackoffMax = c.ReconnectBackoff
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1
	}
	// KafkaProducer.configureDeliveryTimeout: an explicit delivery.timeout.ms
	// below linger.ms + request.timeout.ms is a ConfigException; a default
	// one is raised to that sum.
	if min := c.Linger + c.RequestTimeout; c.DeliveryTimeout < min {
		if _, ok := props["delivery.timeout.ms"]; ok {
			return c, fmt.Errorf("%sdelivery.timeout.ms: %d should be equal to or larger than linger.ms + request.timeout.ms (%d)",
				where("delivery.timeout.ms"), c.DeliveryTimeout.Milliseconds(), min.Milliseconds())
		}
		c.DeliveryTimeout = min
	}
	return c, nil
}

// Validate checks what ParseConfig cannot: that there is somewhere to connect.
func (c Config) Validate() error {
	if len(c.BootstrapServers) == 0 {
		return fmt.Errorf("bootstrap.servers: no server given (want host:port[,host:port...])")
	}
	for _, s := range c.BootstrapServers {
		if err := checkHostPort(s); err != nil {
			return fmt.Errorf("bootstrap.servers: %q: %v", s, err)
		}
	}
	// A Config built in code gets the catalog's checks, and words, too.
	if err := rules.CheckJavaValue("max.in.flight.requests.per.connection", strconv.Itoa(c.MaxInFlight)); err != nil {
		return err
	}
	if err := rules.CheckJavaValue("acks", strconv.Itoa(int(c.Acks))); err != nil {
		return err
	}
	if _, err := compressor(c.CompressionType); err != nil {
		return err
	}
	return nil
}

func checkHostPort(s string) error {
	host, port, err := splitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("no host (want host:port)")
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port (want host:port)")
	}
	return nil
}

// set stores the value of key, one of keySet, whose value the catalog has
// accepted (rules.CheckJavaValue). It refuses what this producer does not
// implement or that its own keys (kdiag.*, and allow.auto.create.topics,
// which the Java producer does not have) do not allow. Its messages start
// with the key, as the catalog's do.
func (c *Config) set(key, raw string) error {
	v := strings.TrimSpace(raw)
	var err error
	switch key {
	case "bootstrap.servers":
		c.BootstrapServers = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.BootstrapServers = append(c.BootstrapServers, s)
			}
		}
		var bad []error
		for _, s := range c.BootstrapServers {
			if err := checkHostPort(s); err != nil {
				bad = append(bad, fmt.Errorf("%s: %q: %v", key, s, err))
			}
		}
		return errors.Join(bad...)
	case "client.id":
		c.ClientID = v
	case "acks":
		if v == "all" {
			v = "-1"
		}
		var n int64
		n, err = integer(key, raw, v)
		c.Acks = int16(n)
	case "linger.ms":
		c.Linger, err = millis(key, raw, v)
	case "batch.size":
		c.BatchSize, err = intOf(key, raw, v)
	case "buffer.memory":
		c.BufferMemory, err = integer(key, raw, v)
	case "max.block.ms":
		c.MaxBlock, err = millis(key, raw, v)
	case "max.request.size":
		c.MaxRequestSize, err = intOf(key, raw, v)
	case "request.timeout.ms":
		c.RequestTimeout, err = millis(key, raw, v)
	case "delivery.timeout.ms":
		c.DeliveryTimeout, err = millis(key, raw, v)
	case "retries":
		c.Retries, err = intOf(key, raw, v)
	case "retry.backoff.ms":
		c.RetryBackoff, err = millis(key, raw, v)
	case "retry.backoff.max.ms":
		c.RetryBackoffMax, err = millis(key, raw, v)
	case "max.in.flight.requests.per.connection":
		c.MaxInFlight, err = intOf(key, raw, v)
	case "metadata.max.age.ms":
		c.MetadataMaxAge, err = millis(key, raw, v)
	case "connections.max.idle.ms":
		c.ConnectionsMaxIdle, err = millis(key, raw, v)
	case "reconnect.backoff.ms":
		c.ReconnectBackoff, err = millis(key, raw, v)
	case "reconnect.backoff.max.ms":
		c.ReconnectBackoffMax, err = millis(key, raw, v)
	case "socket.connection.setup.timeout.ms":
		// Java has no validator here, and neither do we: a negative value
		// is a timeout of 0 or less for every attempt (see the field).
		c.SocketConnectionSetupTimeout, err = millis(key, raw, v)
	case "socket.connection.setup.timeout.max.ms":
		c.SocketConnectionSetupTimeoutMax, err = millis(key, raw, v)
	case "compression.type":
		if _, err := compressor(v); err != nil {
			return err
		}
		c.CompressionType = v
	case "enable.idempotence":
		c.EnableIdempotence, err = boolean(key, raw, v)
	case "allow.auto.create.topics":
		c.AllowAutoTopicCreation, err = boolean(key, raw, v)
	case "security.protocol":
		if !strings.EqualFold(v, "PLAINTEXT") {
			return fmt.Errorf("%s: %q is not implemented by kdiag's producer (want PLAINTEXT)", key, raw)
		}
	case KeyReader:
		c.Reader, err = ParseReaderMode(v)
		if err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
	case KeyModel:
		c.Model, err = ParseModel(v)
		if err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
	case KeyCallbackDelay:
		c.CallbackDelay, err = nonNegativeMillis(key, raw, v)
	default:
		// keySet and this switch disagree: a defect, not the user's.
		return fmt.Errorf("%s: not implemented by kdiag's producer", key)
	}
	return err
}

// keySet holds the keys ParseConfig uses (Keys lists them).
var keySet = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range keyList {
		m[k] = true
	}
	return m
}()

// The parsers below take the key, the value as written (for messages,
// quoted as kdiag lint quotes it) and the value trimmed. For a catalog key
// the catalog has already checked the value, so they only convert; for
// kdiag's own keys they are the whole check, in the catalog's words.

// integer reads a whole number (Java LONG).
func integer(key, raw, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a whole number", key, raw)
	}
	return n, nil
}

// intOf is integer for an int field. The catalog has bounded every key
// read this way to a Java INT, so the value fits.
func intOf(key, raw, v string) (int, error) {
	n, err := integer(key, raw, v)
	return int(n), err
}

// millis reads a whole number of milliseconds, as a Duration clamped to what
// a Duration holds (Java's Long.MAX_VALUE ms is "forever" either way).
func millis(key, raw, v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number of milliseconds", key, raw)
	}
	if n > math.MaxInt64/int64(time.Millisecond) {
		n = math.MaxInt64 / int64(time.Millisecond)
	}
	if n < math.MinInt64/int64(time.Millisecond) {
		n = math.MinInt64 / int64(time.Millisecond)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// nonNegativeMillis is millis for keys where kdiag's producer needs at
// least 0.
func nonNegativeMillis(key, raw, v string) (time.Duration, error) {
	d, err := millis(key, raw, v)
	if err == nil && d < 0 {
		return 0, fmt.Errorf("%s: %s is out of range: kdiag's producer requires at least 0", key, v)
	}
	return d, err
}

// boolean reads a Java BOOLEAN: true or false in any case.
func boolean(key, raw, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is not true or false", key, raw)
}
