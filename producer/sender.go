// The network goroutine: KafkaProducer's Sender thread. It owns every
// connection, the metadata and the record accumulator, and runs step
// whenever an event, a Send or a timer wakes it. The other files of the
// package hold what step drives: connections.go (connecting, idle and
// timeout closes, closing), requests.go (writing requests and reading
// responses), versions.go (APIVERSIONS), metadata.go, batches.go (the
// record accumulator), produce_requests.go (PRODUCE) and shutdown.go.

package producer

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// sender is the network goroutine's state: KafkaProducer's Sender with its
// NetworkClient, Metadata and RecordAccumulator, all owned by one goroutine.
type sender struct {
	p *Producer

	nextConnID uint64
	corr       int32
	bootstrap  []Node
	brokers    map[int32]Node
	haveMeta   bool
	conns      map[int32]*conn
	nodes      map[int32]*nodeState

	topics       map[string]*topicMeta
	wanted       map[string]bool
	waiting      map[string][]*pending
	batches      map[topicPartition][]*batch
	stickies     map[string]*sticky
	mdInProgress bool
	mdNeed       bool
	mdLast       time.Time // last successful refresh
	mdAttempt    time.Time // last attempt
	// The idempotent producer's ID (3.9.0, enable.idempotence): produce
	// waits until INIT_PRODUCER_ID gave one; sequences count per partition.
	pid          int64
	epoch        int16
	havePID      bool
	pidInFlight  bool
	sequences    map[topicPartition]int32
	telemetryOut bool // 3.9.0: GET_TELEMETRY_SUBSCRIPTIONS sent
	stopping     bool
	// wakeups counts the network goroutine's waits that ended (an event, a
	// Send, a timer): a connection attempt's setup timeout is checked only
	// after one (checkSetupTimeout).
	wakeups uint64
}

func newSender(p *Producer) (*sender, error) {
	s := &sender{
		p:         p,
		brokers:   map[int32]Node{},
		conns:     map[int32]*conn{},
		nodes:     map[int32]*nodeState{},
		topics:    map[string]*topicMeta{},
		wanted:    map[string]bool{},
		waiting:   map[string][]*pending{},
		batches:   map[topicPartition][]*batch{},
		stickies:  map[string]*sticky{},
		sequences: map[topicPartition]int32{},
		mdNeed:    true,
		pid:       -1,
		epoch:     -1,
	}
	for i, hp := range p.cfg.BootstrapServers {
		host, port, err := splitHostPort(hp)
		if err != nil {
			return nil, fmt.Errorf("bootstrap.servers: %q: %v", hp, err)
		}
		s.bootstrap = append(s.bootstrap, Node{ID: int32(-1 - i), Host: host, Port: int32(port)})
	}
	return s, nil
}

func (s *sender) cfg() *Config { return &s.p.cfg }

func (s *sender) run() {
	defer close(s.p.senderDone)
	now := time.Now()
	if s.cfg().Model == ModelJava21 {
		// 2.1.1 counts its bootstrap metadata as fresh at creation
		// (Metadata.update with the bootstrap cluster): nothing connects
		// until a send needs a topic's metadata or metadata.max.age.ms
		// runs out.
		s.mdNeed, s.mdLast = false, now
	}
	// 3.9.0 (mdNeed from newSender) asks for metadata at once: one
	// bootstrap server, the least loaded (leastLoaded), gets a connection.
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.step(time.Now())
		d := time.Until(next)
		if d < time.Millisecond {
			d = time.Millisecond
		}
		timer.Reset(d)
		select {
		case ev := <-s.p.events:
			s.handle(ev)
			s.handleReady()
		case <-s.p.wake:
		case <-timer.C:
		case <-s.p.stop:
			s.shutdown()
			return
		}
		s.wakeups++
	}
}

// handleReady handles the events already waiting, up to one per connection
// and a few more, before step runs again: Java's Selector.poll handles every
// ready channel before its idle expiry (maybeCloseOldestConnection), so a
// FIN read while a callback blocked is handled as the peer's close, not
// overtaken by an idle close of the same connection.
func (s *sender) handleReady() {
	for range len(s.conns) + 4 {
		select {
		case ev := <-s.p.events:
			s.handle(ev)
		default:
			return
		}
	}
}

// step does whatever is due and returns when it next has something to do.
func (s *sender) step(now time.Time) time.Time {
	next := now.Add(time.Hour)
	soon := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	recs, flushing := s.p.takeIncoming()
	for _, pr := range recs {
		s.route(pr, now)
	}
	s.expire(now, soon)
	s.checkConnections(now, soon)
	s.maybeUpdateMetadata(now, soon)
	s.maybeInitProducerID(now, soon)
	s.maybeTelemetry(now, soon)
	s.sendProduce(now, flushing, soon)
	// NetworkClient.poll waits at most request.timeout.ms (with the
	// metadata and telemetry timeouts, already in next), whatever else is
	// due; idle connections are not among what it waits for
	// (checkConnections), so an idle one is closed at the first poll that
	// ends after its deadline.
	soon(now.Add(s.cfg().RequestTimeout))
	// Requests sent and connections started just now have deadlines too.
	for _, c := range s.conns {
		if len(c.inflight) > 0 {
			soon(c.inflight[0].sent.Add(s.cfg().RequestTimeout))
		}
		if c.state == stateConnecting {
			soon(s.setupCheckAt(c))
		}
	}
	return next
}

func errName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Message
		}
		return err.Error()
	}
	return "NONE"
}
