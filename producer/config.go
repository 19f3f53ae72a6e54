package producer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
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
// client's keys (ProducerConfig); defaults are the Java 4.x client's
// (../shared/reference/java-producer-configs.tsv), except EnableIdempotence,
// which this producer does not implement.
type Config struct {
	// BootstrapServers is bootstrap.servers: host:port pairs, nodes -1, -2, ...
	BootstrapServers []string
	// ClientID is client.id, sent in every request header.
	ClientID string
	// Acks is acks: -1 (all), 0 or 1.
	Acks int16
	// Linger is linger.ms (Java 4.x default 5 ms).
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
	// SocketConnectionSetupTimeout is socket.connection.setup.timeout.ms.
	SocketConnectionSetupTimeout time.Duration
	// CompressionType is compression.type: none, gzip, snappy, lz4 or zstd.
	CompressionType string
	// EnableIdempotence is enable.idempotence as written. Idempotence is not
	// implemented: true is accepted, logged, and produces without a producer
	// ID (see the package documentation).
	EnableIdempotence bool
	// AllowAutoTopicCreation is allow.auto.create.topics: sent in METADATA.
	AllowAutoTopicCreation bool
	// Reader is kdiag.reader: poll or on-demand.
	Reader ReaderMode
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
		Acks:                         -1,
		Linger:                       5 * time.Millisecond,
		BatchSize:                    16384,
		BufferMemory:                 33554432,
		MaxBlock:                     60 * time.Second,
		MaxRequestSize:               1048576,
		RequestTimeout:               30 * time.Second,
		DeliveryTimeout:              120 * time.Second,
		Retries:                      math.MaxInt32,
		RetryBackoff:                 100 * time.Millisecond,
		RetryBackoffMax:              time.Second,
		MaxInFlight:                  5,
		MetadataMaxAge:               300 * time.Second,
		ConnectionsMaxIdle:           540 * time.Second,
		ReconnectBackoff:             50 * time.Millisecond,
		ReconnectBackoffMax:          time.Second,
		SocketConnectionSetupTimeout: 10 * time.Second,
		CompressionType:              "none",
		AllowAutoTopicCreation:       true,
		Reader:                       ReaderPoll,
	}
}

// Keys kdiag defines on top of the Java client's.
const (
	KeyReader        = "kdiag.reader"
	KeyCallbackDelay = "kdiag.callback.delay.ms"
)

// ParseConfig builds a Config from properties (key to value, as
// config.File.Map returns them). A bad value is an error naming the key, the
// value and what is expected; unknown keys land in Config.Ignored.
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
	bad := func(key, val, want string) {
		errs = append(errs, fmt.Sprintf("%s%s: %q is not %s", where(key), key, val, want))
	}
	for _, k := range keys {
		v := strings.TrimSpace(props[k])
		var err error
		switch k {
		case "bootstrap.servers":
			c.BootstrapServers = nil
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.BootstrapServers = append(c.BootstrapServers, s)
				}
			}
			for _, s := range c.BootstrapServers {
				if err := checkHostPort(s); err != nil {
					errs = append(errs, fmt.Sprintf("%s%s: %q: %v", where(k), k, s, err))
				}
			}
		case "client.id":
			c.ClientID = v
		case "acks":
			switch v {
			case "all", "-1":
				c.Acks = -1
			case "0":
				c.Acks = 0
			case "1":
				c.Acks = 1
			default:
				bad(k, v, "a valid acks value (want all, -1, 0 or 1)")
			}
		case "linger.ms":
			c.Linger, err = msValue(v, 0)
		case "batch.size":
			c.BatchSize, err = intValue(v, 0)
		case "buffer.memory":
			var n int
			n, err = intValue(v, 0)
			c.BufferMemory = int64(n)
		case "max.block.ms":
			c.MaxBlock, err = msValue(v, 0)
		case "max.request.size":
			c.MaxRequestSize, err = intValue(v, 0)
		case "request.timeout.ms":
			c.RequestTimeout, err = msValue(v, 0)
		case "delivery.timeout.ms":
			c.DeliveryTimeout, err = msValue(v, 0)
		case "retries":
			c.Retries, err = intValue(v, 0)
		case "retry.backoff.ms":
			c.RetryBackoff, err = msValue(v, 0)
		case "retry.backoff.max.ms":
			c.RetryBackoffMax, err = msValue(v, 0)
		case "max.in.flight.requests.per.connection":
			c.MaxInFlight, err = intValue(v, 1)
		case "metadata.max.age.ms":
			c.MetadataMaxAge, err = msValue(v, 0)
		case "connections.max.idle.ms":
			c.ConnectionsMaxIdle, err = msValue(v, math.MinInt64)
		case "reconnect.backoff.ms":
			c.ReconnectBackoff, err = msValue(v, 0)
		case "reconnect.backoff.max.ms":
			c.ReconnectBackoffMax, err = msValue(v, 0)
		case "socket.connection.setup.timeout.ms":
			c.SocketConnectionSetupTimeout, err = msValue(v, 0)
		case "compression.type":
			switch v {
			case "none", "gzip", "snappy", "lz4", "zstd":
				c.CompressionType = v
			default:
				bad(k, v, "a compression type (want none, gzip, snappy, lz4 or zstd)")
			}
		case "enable.idempotence":
			c.EnableIdempotence, err = boolValue(v)
		case "allow.auto.create.topics":
			c.AllowAutoTopicCreation, err = boolValue(v)
		case "security.protocol":
			if !strings.EqualFold(v, "PLAINTEXT") {
				errs = append(errs, fmt.Sprintf("%s%s: %q is not implemented by kdiag's producer (want PLAINTEXT)", where(k), k, v))
			}
		case KeyReader:
			c.Reader, err = ParseReaderMode(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s%s: %v", where(k), k, err))
				err = nil
			}
		case KeyCallbackDelay:
			c.CallbackDelay, err = msValue(v, 0)
		default:
			c.Ignored = append(c.Ignored, k)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s%s: %q is not %v", where(k), k, v, err))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%s", strings.Join(errs, "; "))
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
	if c.MaxInFlight < 1 {
		return fmt.Errorf("max.in.flight.requests.per.connection: %d is not at least 1", c.MaxInFlight)
	}
	switch c.Acks {
	case -1, 0, 1:
	default:
		return fmt.Errorf("acks: %d is not a valid acks value (want all, -1, 0 or 1)", c.Acks)
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

// msValue reads a Java LONG of milliseconds, at least min.
func msValue(v string, min int64) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("a number of milliseconds")
	}
	if n < min {
		return 0, fmt.Errorf("a number of milliseconds of at least %d", min)
	}
	if n > math.MaxInt64/int64(time.Millisecond) {
		n = math.MaxInt64 / int64(time.Millisecond)
	}
	if n < math.MinInt64/int64(time.Millisecond) {
		n = math.MinInt64 / int64(time.Millisecond)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// intValue reads a Java INT, at least min.
func intValue(v string, min int) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("an integer (32-bit)")
	}
	if int(n) < min {
		return 0, fmt.Errorf("an integer of at least %d", min)
	}
	return int(n), nil
}

// boolValue reads a Java BOOLEAN, which is case-insensitive true or false.
func boolValue(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("a boolean (want true or false)")
}
