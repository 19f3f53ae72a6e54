package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one message to produce. Key and Value are not copied: do not
// change them after Send.
type Record struct {
	Topic   string
	Key     []byte // nil: the sticky partitioner picks the partition
	Value   []byte
	Headers []Header
	// Timestamp is the record's CreateTime; zero means the time of Send.
	Timestamp time.Time
}

// RecordMetadata is what the broker acknowledged for a record.
type RecordMetadata struct {
	Topic     string
	Partition int32
	// Offset is the record's offset, -1 with acks=0 (no response).
	Offset    int64
	Timestamp time.Time
}

// Errors a callback or Send can return.
var (
	// ErrClosed: the producer is closed or closing.
	ErrClosed = errors.New("producer is closed")
	// ErrRecordTooLarge: a record larger than max.request.size.
	ErrRecordTooLarge = errors.New("record is larger than max.request.size")
)

// TimeoutError is a record that was not acknowledged within
// delivery.timeout.ms (or could not be buffered within max.block.ms).
type TimeoutError struct{ Msg string }

func (e *TimeoutError) Error() string { return e.Msg }

// Option changes how New builds a Producer.
type Option func(*options)

type options struct {
	log    *slog.Logger
	reader *ReaderMode
}

// WithLogger sends the producer's logs (NetworkClient-style connection
// events at debug level) to l. The default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReader overrides kdiag.reader (Config.Reader).
func WithReader(m ReaderMode) Option { return func(o *options) { o.reader = &m } }

// Stats are the producer's counters since New. Connections closed by the
// client are split by why; PeerCloses are connections the broker closed
// first (the producer read EOF or a reset, then closed its socket).
type Stats struct {
	ConnectionsOpened int64 `json:"connections_opened"`
	// ConnectionsOpen is the number open (connected) now.
	ConnectionsOpen int64 `json:"connections_open"`
	ConnectFailures int64 `json:"connect_failures"`
	// Reconnects counts connections opened to a node that had one before.
	Reconnects int64 `json:"reconnects"`
	// ClosedIdle: closed by the client after connections.max.idle.ms.
	ClosedIdle int64 `json:"closed_idle"`
	// ClosedOnClose: closed by Close.
	ClosedOnClose int64 `json:"closed_on_close"`
	// ClosedOnError: closed by the client after a write failure, a request
	// timeout or a bad response.
	ClosedOnError int64 `json:"closed_on_error"`
	// PeerCloses: the broker closed first (EOF or reset seen).
	PeerCloses       int64 `json:"peer_closes"`
	RecordsSent      int64 `json:"records_sent"`
	RecordsAcked     int64 `json:"records_acked"`
	RecordsFailed    int64 `json:"records_failed"`
	MetadataRequests int64 `json:"metadata_requests"`
	ProduceRequests  int64 `json:"produce_requests"`
}

// ClosedByClient is the number of connections the producer closed first.
func (s Stats) ClosedByClient() int64 { return s.ClosedIdle + s.ClosedOnClose + s.ClosedOnError }

type counters struct {
	opened, open, connectFailures, reconnects                   atomic.Int64
	closedIdle, closedOnClose, closedOnError, peerCloses        atomic.Int64
	recordsSent, recordsAcked, recordsFailed, metadata, produce atomic.Int64
}

// Producer is a Kafka producer whose network lifecycle follows the Java
// KafkaProducer's (see the package documentation). Its methods are safe for
// concurrent use.
type Producer struct {
	cfg        Config
	log        *slog.Logger
	formatter  *kmsg.RequestFormatter
	compressor kgo.Compressor
	stats      counters

	mu         sync.Mutex
	closing    bool
	incoming   []*pending
	buffered   int64
	spaceCh    chan struct{} // closed and replaced when buffer space frees
	incomplete int
	allDone    chan struct{} // closed when incomplete drops to 0
	flushing   int

	wake       chan struct{} // cap 1: Send, Flush and Close nudge the sender
	events     chan event
	stop       chan struct{}
	senderDone chan struct{}
	ctx        context.Context // cancels dials at shutdown
	cancel     context.CancelFunc
	wg         sync.WaitGroup // readers and dialers
	closeOnce  sync.Once
	closeErr   error
}

// pending is a record between Send and its callback.
type pending struct {
	rec       batchRecord
	topic     string
	size      int
	cb        func(RecordMetadata, error)
	created   time.Time
	partition int32
}

// New starts a producer: its network goroutine connects to every bootstrap
// server and fetches metadata at once, as KafkaProducer's Sender does.
func New(cfg Config, opts ...Option) (*Producer, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.reader != nil {
		cfg.Reader = *o.reader
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	comp, err := compressor(cfg.CompressionType)
	if err != nil {
		return nil, err
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.ClientID == "" {
		cfg.ClientID = fmt.Sprintf("producer-%d", clientSeq.Add(1))
	}
	for _, k := range cfg.Ignored {
		log.Debug(fmt.Sprintf("Ignoring config %s: kdiag's producer does not use it (kdiag lint checks it)", k))
	}
	if cfg.EnableIdempotence && cfg.Model == ModelJava39 {
		log.Info("Instantiated an idempotent producer.")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		cfg:        cfg,
		log:        log,
		formatter:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		compressor: comp,
		spaceCh:    make(chan struct{}),
		allDone:    make(chan struct{}),
		wake:       make(chan struct{}, 1),
		events:     make(chan event),
		stop:       make(chan struct{}),
		senderDone: make(chan struct{}),
		ctx:        ctx,
		cancel:     cancel,
	}
	close(p.allDone)
	s, err := newSender(p)
	if err != nil {
		cancel()
		return nil, err
	}
	log.Info("Kafka version: " + cfg.Model.Version() + " (kdiag's model " + cfg.Model.String() + ")")
	log.Debug(fmt.Sprintf("Starting Kafka producer I/O thread (reader %s, connections.max.idle.ms %d)",
		cfg.Reader, cfg.ConnectionsMaxIdle.Milliseconds()), "client_id", cfg.ClientID)
	go s.run()
	return p, nil
}

var clientSeq atomic.Int64

// Config returns the configuration the producer runs with.
func (p *Producer) Config() Config { return p.cfg }

// Send queues a record and returns; callback (which may be nil) runs on the
// producer's network goroutine once the broker acknowledged the record or it
// failed. Send blocks only while buffer.memory is full, for at most
// max.block.ms or until ctx is done.
//
// A callback that blocks stalls the network goroutine, as a slow callback
// stalls the Java client's Sender thread: no response is read and no FIN is
// processed until it returns.
func (p *Producer) Send(ctx context.Context, r Record, callback func(RecordMetadata, error)) error {
	if r.Topic == "" {
		return errors.New("record has no topic")
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	pr := &pending{
		rec:     batchRecord{key: r.Key, value: r.Value, timestamp: ts.UnixMilli()},
		topic:   r.Topic,
		cb:      callback,
		created: time.Now(),
	}
	for _, h := range r.Headers {
		pr.rec.headers = append(pr.rec.headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	pr.size = recordSize(pr.rec)
	if pr.size > p.cfg.MaxRequestSize {
		return fmt.Errorf("%w: %d bytes, max.request.size is %d", ErrRecordTooLarge, pr.size, p.cfg.MaxRequestSize)
	}
	var block <-chan time.Time
	p.mu.Lock()
	for {
		if p.closing {
			p.mu.Unlock()
			return ErrClosed
		}
		if p.buffered == 0 || p.buffered+int64(pr.size) <= p.cfg.BufferMemory {
			break
		}
		ch := p.spaceCh
		p.mu.Unlock()
		if block == nil {
			t := time.NewTimer(p.cfg.MaxBlock)
			defer t.Stop()
			block = t.C
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-block:
			return &TimeoutError{Msg: fmt.Sprintf("Failed to allocate memory within the configured max blocking time %d ms.", p.cfg.MaxBlock.Milliseconds())}
		}
		p.mu.Lock()
	}
	p.buffered += int64(pr.size)
	if p.incomplete == 0 {
		p.allDone = make(chan struct{})
	}
	p.incomplete++
	p.incoming = append(p.incoming, pr)
	p.mu.Unlock()
	p.nudge()
	return nil
}

func (p *Producer) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// done accounts for a record whose callback has run.
func (p *Producer) done(pr *pending) {
	p.mu.Lock()
	p.buffered -= int64(pr.size)
	close(p.spaceCh)
	p.spaceCh = make(chan struct{})
	p.incomplete--
	if p.incomplete == 0 {
		close(p.allDone)
	}
	p.mu.Unlock()
}

// Flush sends every buffered record at once (linger.ms no longer applies) and
// waits until each has been acknowledged or has failed, or ctx is done.
// Do not call Flush or Close from a send callback: the callback runs on the
// network goroutine they wait for, so they would wait forever.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.incomplete == 0 {
		p.mu.Unlock()
		return nil
	}
	p.flushing++
	ch := p.allDone
	p.mu.Unlock()
	p.nudge()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes (bounded by ctx), then fails what is left with ErrClosed,
// closes every connection and stops the producer's goroutines. It waits for
// the network goroutine even after ctx is done, so that nothing is left
// behind; a user callback that never returns therefore blocks Close.
// Close is idempotent.
func (p *Producer) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		p.closeErr = p.Flush(ctx)
		close(p.stop)
		<-p.senderDone
		p.cancel()
	})
	return p.closeErr
}

// Stats returns the counters.
func (p *Producer) Stats() Stats {
	c := &p.stats
	return Stats{
		ConnectionsOpened: c.opened.Load(),
		ConnectionsOpen:   c.open.Load(),
		ConnectFailures:   c.connectFailures.Load(),
		Reconnects:        c.reconnects.Load(),
		ClosedIdle:        c.closedIdle.Load(),
		ClosedOnClose:     c.closedOnClose.Load(),
		ClosedOnError:     c.closedOnError.Load(),
		PeerCloses:        c.peerCloses.Load(),
		RecordsSent:       c.recordsSent.Load(),
		RecordsAcked:      c.recordsAcked.Load(),
		RecordsFailed:     c.recordsFailed.Load(),
		MetadataRequests:  c.metadata.Load(),
		ProduceRequests:   c.produce.Load(),
	}
}

// takeIncoming hands the records queued by Send to the network goroutine.
func (p *Producer) takeIncoming() (recs []*pending, flushing bool) {
	p.mu.Lock()
	recs, p.incoming = p.incoming, nil
	flushing = p.flushing > 0 || p.closing
	p.mu.Unlock()
	return recs, flushing
}

// Node is a broker as the Java client's Node prints it.
type Node struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

// String is Node.toString: "localhost:9092 (id: -1 rack: null)".
func (n Node) String() string {
	rack := "null"
	if n.Rack != nil {
		rack = *n.Rack
	}
	return fmt.Sprintf("%s:%d (id: %d rack: %s)", n.Host, n.Port, n.ID, rack)
}
