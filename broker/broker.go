// Package broker runs an embedded Kafka cluster (franz-go's kfake) whose
// brokers close connections idle for longer than Config.Idle, as a real
// broker does with connections.max.idle.ms (600000 ms by default). kfake has
// no idle timeout of its own; the package wraps each broker's listener
// (kfake.ListenFn) so that every connection records its last request read and
// response written, and a reaper closes the idle ones. That close is the FIN
// that leaves a client which does not read idle connections in CLOSE_WAIT.
//
// Every accept and close is logged through slog with the remote address, the
// broker's node id, Kafka's connection id ("local-remote-index": a client's
// reconnect from the port it just closed gets a new one) and, for a close,
// why: idle, client closed (EOF), client reset, shutdown.
//
// Its resources are bounded, so that it can run for days under a test: the
// request bytes it holds across all connections (Config.MaxQueuedRequestBytes,
// budget.go), what each partition keeps (Config.RetentionBytes,
// retention.go), and an accept that fails for want of file descriptors is
// retried rather than fatal (accept.go).
package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultPort is the first port tried when Config.Ports is empty: brokers
// get DefaultPort, DefaultPort+1, ... when those are free.
const DefaultPort = 9092

// Config configures Start.
type Config struct {
	// Brokers is the number of brokers (node ids 0..Brokers-1); 0 means 3,
	// or len(Ports) when Ports is set.
	Brokers int
	// Ports are the brokers' ports, one per broker; a 0 picks a free port.
	// Empty means 9092, 9093, ... when all are free, free ports otherwise
	// (Notes says so). A set port that is busy is an error.
	Ports []int
	// Listen is the address the brokers bind; "" means 127.0.0.1. Anything
	// but a loopback address exposes an unauthenticated broker.
	Listen string
	// Advertise is the host the brokers advertise in metadata; "" means
	// Listen, or the host name when Listen is a wildcard (0.0.0.0, ::).
	Advertise string
	// Idle is the broker's connections.max.idle.ms: a connection with no
	// request received and no response sent for Idle is closed by the
	// broker. 0 never closes idle connections. As in Kafka's Selector, a
	// connection waiting on a slow response (a Fetch whose max wait exceeds
	// Idle) has no activity and counts as idle.
	Idle time.Duration
	// Topics are created at start; any other topic is created on first use
	// (auto.create.topics.enable=true).
	Topics []string
	// Partitions is the partition count of created topics; 0 means one per
	// broker, so that every broker leads a partition and a producer that
	// writes to every partition connects to every broker.
	Partitions int
	// MaxRequestBytes is the broker's socket.request.max.bytes: a request
	// frame larger than this is refused and its connection closed, before
	// any of it is buffered. 0 means DefaultMaxRequestBytes (100 MiB, as
	// Kafka).
	MaxRequestBytes int
	// MaxQueuedRequestBytes bounds the request bytes the cluster holds at
	// once across all connections and brokers (Kafka's
	// queued.max.request.bytes, which is unbounded by default): a frame
	// takes room as its bytes arrive and gives it back when the broker is
	// done with it; a reader that finds no room waits, and a frame larger
	// than the bound is refused and its connection closed. Unlike Kafka,
	// a bound below MaxRequestBytes is taken (and refuses the frames
	// between). 0 means DefaultMaxQueuedRequestBytes (32 MiB).
	MaxQueuedRequestBytes int64
	// RetentionBytes bounds each partition's log, as a broker's
	// log.retention.bytes: once a partition holds more, its oldest batches
	// are dropped and its log start offset moves past them, so a consumer
	// asking for a dropped offset gets OFFSET_OUT_OF_RANGE. A topic's own
	// retention.bytes overrides it. 0 means DefaultRetentionBytes; a
	// negative value keeps every record (Kafka's -1).
	RetentionBytes int64
	// Logger receives the accept and close events; nil discards them.
	Logger *slog.Logger
}

// Counts are connection counts of one broker or of the whole cluster.
type Counts struct {
	// Accepted is how many connections the broker accepted.
	Accepted int `json:"accepted"`
	// Open is how many are open now.
	Open int `json:"open"`
	// ClosedIdle is how many the broker closed for idleness.
	ClosedIdle int `json:"closed_idle"`
	// ClosedByClient is how many the client closed (EOF or RST) first.
	ClosedByClient int `json:"closed_by_client"`
	// ClosedShutdown is how many were closed by Close.
	ClosedShutdown int `json:"closed_shutdown"`
	// ClosedInvalid is how many the broker closed because it refused a
	// request frame (ReasonInvalidRequest).
	ClosedInvalid int `json:"closed_invalid"`
	// ClosedOther is how many kfake dropped for another reason.
	ClosedOther int `json:"closed_other"`
}

func (c *Counts) add(o Counts) {
	c.Accepted += o.Accepted
	c.Open += o.Open
	c.ClosedIdle += o.ClosedIdle
	c.ClosedByClient += o.ClosedByClient
	c.ClosedShutdown += o.ClosedShutdown
	c.ClosedInvalid += o.ClosedInvalid
	c.ClosedOther += o.ClosedOther
}

// BrokerStats are one broker's Counts.
type BrokerStats struct {
	Node int32  `json:"node"`
	Addr string `json:"addr"`
	Counts
}

// Stats are the cluster's connection counts: the totals and each broker's.
type Stats struct {
	Counts
	Brokers []BrokerStats `json:"brokers"`
}

// Cluster is a running embedded cluster.
type Cluster struct {
	kf      *kfake.Cluster
	lns     []*listener
	log     *slog.Logger
	notes   []string
	closing atomic.Bool

	stop      chan struct{}
	reapers   sync.WaitGroup
	closeOnce sync.Once

	mu      sync.Mutex
	stopCtx func() bool // unregisters the AfterFunc of Start's ctx

	// legacyMetadata counts the Metadata v0-3 requests given Kafka's
	// meaning (legacyMetadataControl).
	legacyMetadata atomic.Int64

	// budget bounds the request bytes held across every connection.
	budget *requestBudget
	// sinceRetention is how many record bytes were produced since
	// retention last ran (installRetention).
	sinceRetention atomic.Int64
}

// Start starts the cluster. It is closed by Close or when ctx is done.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Brokers < 0 || cfg.Partitions < 0 || cfg.Idle < 0 {
		return nil, errors.New("broker: Brokers, Partitions and Idle must not be negative")
	}
	maxRequest := cfg.MaxRequestBytes
	if maxRequest == 0 {
		maxRequest = DefaultMaxRequestBytes
	}
	if maxRequest < 0 || maxRequest > math.MaxInt32 {
		return nil, fmt.Errorf("broker: MaxRequestBytes %d is out of range: give 1 to %d bytes (Kafka's socket.request.max.bytes is an int)", cfg.MaxRequestBytes, math.MaxInt32)
	}
	maxQueued := cfg.MaxQueuedRequestBytes
	if maxQueued == 0 {
		maxQueued = DefaultMaxQueuedRequestBytes
	}
	if maxQueued < 0 {
		return nil, fmt.Errorf("broker: MaxQueuedRequestBytes %d is negative: give a number of bytes, or 0 for the default (%d)", maxQueued, DefaultMaxQueuedRequestBytes)
	}
	retention := cfg.RetentionBytes
	if retention == 0 {
		retention = DefaultRetentionBytes
	}
	versions, err := kfakeVersions()
	if err != nil {
		return nil, err
	}
	n := cfg.Brokers
	if n == 0 {
		n = len(cfg.Ports)
	}
	if n == 0 {
		n = 3
	}
	if len(cfg.Ports) > 0 && len(cfg.Ports) != n {
		return nil, fmt.Errorf("broker: %d ports for %d brokers: give one port per broker", len(cfg.Ports), n)
	}
	host := cfg.Listen
	if host == "" {
		host = "127.0.0.1"
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("broker: listen address %q is not an IP address", host)
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = host
		if net.ParseIP(host).IsUnspecified() {
			if h, err := os.Hostname(); err == nil && h != "" {
				adv = h
			}
		}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	c := &Cluster{log: logger, stop: make(chan struct{})}
	c.budget = newRequestBudget(maxQueued, func(used, max int64) {
		logger.Warn("request bytes held reached the bound: reading requests waits for room as the broker answers the ones it holds; raise --max-queued-request-bytes if memory allows",
			"held_bytes", used, "max_queued_request_bytes", max)
	})
	raw, notes, err := listenAll(host, cfg.Ports, n, DefaultPort)
	if err != nil {
		return nil, err
	}
	c.notes = notes
	ports := make([]int, n)
	byPort := make(map[int]*listener, n)
	for i, ln := range raw {
		port := ln.Addr().(*net.TCPAddr).Port
		ports[i] = port
		l := &listener{
			Listener:   ln,
			c:          c,
			node:       int32(i),
			advertise:  hostPort(net.JoinHostPort(adv, strconv.Itoa(port))),
			maxRequest: int32(maxRequest),
			versions:   versions,
			conns:      make(map[*trackedConn]struct{}),
		}
		c.lns = append(c.lns, l)
		byPort[port] = l
	}

	parts := cfg.Partitions
	if parts == 0 {
		parts = n
	}
	opts := []kfake.Opt{
		kfake.Ports(ports...),
		// kfake asks for "127.0.0.1:<port>"; we hand it the listener
		// already bound to cfg.Listen on that port, so a busy port fails
		// in listenAll with a clear error and the advertised address is
		// ours.
		kfake.ListenFn(func(_, address string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			pn, _ := strconv.Atoi(p)
			l, ok := byPort[pn]
			if !ok {
				return nil, fmt.Errorf("broker: kfake asked for unexpected address %s", address)
			}
			return l, nil
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(parts),
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(parts), cfg.Topics...))
	}
	if retention > 0 {
		opts = append(opts, kfake.BrokerConfigs(retentionConfigs(retention)))
	}
	kf, err := kfake.NewCluster(opts...)
	if err != nil {
		for _, l := range raw {
			l.Close()
		}
		return nil, fmt.Errorf("broker: start kfake: %w", err)
	}
	c.kf = kf
	c.keepControl(kmsg.Metadata, c.legacyMetadataControl)
	c.installLimits(parts)
	if retention > 0 {
		c.installRetention(retention)
	}
	for _, l := range c.lns {
		logger.Info("broker listening", "node", l.node, "addr", l.advertise.String(), "bind", l.Listener.Addr().String(), "idle", idleString(cfg.Idle),
			"retention_bytes", retention, "max_queued_request_bytes", maxQueued)
		if cfg.Idle > 0 {
			c.reapers.Add(1)
			go func() {
				defer c.reapers.Done()
				l.reap(cfg.Idle, c.stop)
			}()
		}
	}
	for _, note := range notes {
		logger.Warn(note)
	}
	stop := context.AfterFunc(ctx, c.Close)
	c.mu.Lock()
	c.stopCtx = stop
	c.mu.Unlock()
	return c, nil
}

// legacyMetadataControl gives Metadata v0-3 requests (key 3) the meaning
// Kafka gives them. Those versions have no AllowAutoTopicCreation field,
// which Kafka then reads as true (MetadataRequest.json: "versions": "4+",
// "default": "true"), so that a broker with auto.create.topics.enable
// creates the topics they name (KafkaApis.handleTopicMetadataRequest); and
// in v0 an empty topic list asks for every topic (MetadataRequest.isAllTopics).
// kfake decodes the missing field as false and a v0 empty list as no topic,
// so kafka-python 2.0.2, which sends v1, could not produce to a new topic.
// It runs as a kfake control function, before kfake handles the request,
// and hands it on changed (not handled).
func (c *Cluster) legacyMetadataControl(req kmsg.Request) (kmsg.Response, error, bool) {
	m, ok := req.(*kmsg.MetadataRequest)
	if !ok || m.Version > 3 {
		return nil, nil, false
	}
	c.legacyMetadata.Add(1)
	m.AllowAutoTopicCreation = true
	if m.Version == 0 && len(m.Topics) == 0 {
		m.Topics = nil
	}
	return nil, nil, false
}

func idleString(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return d.String()
}

// listenAll binds n listeners on host. With no ports given it tries
// first, first+1, ... and, if any of those is busy, binds free ports instead and
// says so in a note.
func listenAll(host string, ports []int, n, first int) ([]net.Listener, []string, error) {
	bind := func(want []int) ([]net.Listener, error) {
		var out []net.Listener
		for _, p := range want {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				for _, l := range out {
					l.Close()
				}
				return nil, err
			}
			out = append(out, ln)
		}
		return out, nil
	}
	if len(ports) > 0 {
		lns, err := bind(ports)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, nil, fmt.Errorf("broker: %w: choose other --ports, or omit them to use free ports", err)
			}
			return nil, nil, fmt.Errorf("broker: %w", err)
		}
		return lns, nil, nil
	}
	want := make([]int, n)
	for i := range want {
		want[i] = first + i
	}
	lns, err := bind(want)
	if err == nil {
		return lns, nil, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EACCES) {
		return nil, nil, fmt.Errorf("broker: %w", err)
	}
	lns, err2 := bind(make([]int, n))
	if err2 != nil {
		return nil, nil, fmt.Errorf("broker: %w", err2)
	}
	var got []string
	for _, l := range lns {
		got = append(got, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	want0 := fmt.Sprintf("ports %d-%d are", first, first+n-1)
	if n == 1 {
		want0 = fmt.Sprintf("port %d is", first)
	}
	note := fmt.Sprintf("default %s not free (%v); using free %s %s instead",
		want0, err, map[bool]string{true: "port", false: "ports"}[n == 1], strings.Join(got, ","))
	return lns, []string{note}, nil
}

// Addrs returns each broker's advertised host:port, by node id.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.lns))
	for i, l := range c.lns {
		out[i] = l.advertise.String()
	}
	return out
}

// BootstrapServers returns Addrs as a bootstrap.servers value.
func (c *Cluster) BootstrapServers() string { return strings.Join(c.Addrs(), ",") }

// Notes says what Start did that was not asked for (free ports instead of
// the defaults).
func (c *Cluster) Notes() []string { return append([]string(nil), c.notes...) }

// Stats returns the connection counts so far.
func (c *Cluster) Stats() Stats {
	var s Stats
	for _, l := range c.lns {
		b := BrokerStats{Node: l.node, Addr: l.advertise.String(), Counts: l.counts()}
		s.Brokers = append(s.Brokers, b)
		s.Counts.add(b.Counts)
	}
	return s
}

// CloseIdle closes now, as the broker's idle close (logged and counted as
// idle), every connection with no request being read or answered, and
// returns how many it closed. It is the reaper's close without waiting out
// Idle, for tests and demos that must drive the close rather than race a
// timer; unlike the reaper, which follows Kafka's Selector and closes on
// silence alone, it leaves a connection whose client awaits a response.
func (c *Cluster) CloseIdle() int {
	n := 0
	for _, l := range c.lns {
		n += l.closeIdleNow()
	}
	return n
}

// CloseIdleConn is CloseIdle for one connection, the one whose client
// address is remote (as the broker's log names it: "127.0.0.1:41234"): it
// closes it now, as the broker's idle close, if it is open and idle now,
// and says whether it did. A test that must see a client's reaction to
// each close on its own (the next close not racing the client's answer to
// the last) closes them one at a time.
func (c *Cluster) CloseIdleConn(remote string) bool {
	for _, l := range c.lns {
		if l.closeIdleWhere(func(tc *trackedConn) bool { return tc.Conn.RemoteAddr().String() == remote }) > 0 {
			return true
		}
	}
	return false
}

// Close stops the cluster: it closes the listeners and every connection
// (logged as shutdown) and waits for the reapers. It is safe to call more
// than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		c.mu.Lock()
		if c.stopCtx != nil {
			c.stopCtx()
		}
		c.mu.Unlock()
		close(c.stop)
		c.reapers.Wait()
		c.kf.Close()
		// kfake closes its connections as its goroutines see the cluster
		// die; closing them here too makes Close return with none open.
		for _, l := range c.lns {
			l.closeAll(ReasonShutdown)
		}
	})
}
