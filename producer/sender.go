package producer

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka API keys this producer speaks (the Kafka protocol's ApiKeys).
const (
	keyProduce     int16 = 0
	keyMetadata    int16 = 3
	keyAPIVersions int16 = 18
)

// apiVersionsFirst is the ApiVersions version sent first on a connection:
// the Java 4.x client's latest (v4). A broker that does not know it answers
// UNSUPPORTED_VERSION in a v0 response listing what it supports (KIP-511),
// and we retry with that.
const apiVersionsFirst = 4

// maxPartitions bounds the partition numbers taken from a METADATA response,
// so that a bad response cannot make us allocate without limit.
const maxPartitions = 1 << 20

type connState int

const (
	stateConnecting connState = iota
	stateCheckingAPIVersions
	stateReady
)

// closeReason is why a connection ended.
type closeReason int

const (
	closeIdle          closeReason = iota // client: connections.max.idle.ms
	closeShutdown                         // client: Close
	closeWriteFailed                      // client, after a failed write
	closeTimeout                          // client: request.timeout.ms
	closeProtocol                         // client: a response it cannot use
	closePeerEOF                          // broker closed first: EOF
	closePeerReset                        // broker reset the connection
	closeConnectFailed                    // the connection never came up
)

func (r closeReason) String() string {
	return [...]string{"idle expiry by client", "producer closing", "write failed", "request timeout",
		"bad response", "peer closed (EOF)", "peer reset", "connect failed"}[r]
}

// conn is one connection to a node. Only the network goroutine touches its
// fields, except reads and closed, which its reader goroutine selects on.
type conn struct {
	id         uint64
	node       Node
	desc       string // Java's socketDescription: "localhost/127.0.0.1"
	ip         string
	nc         net.Conn
	state      connState
	versions   map[int16][2]int16 // broker's min and max per API key
	inflight   []*inflight
	lastActive time.Time
	reads      chan struct{} // on-demand: one token per response to read
	closed     chan struct{}
	isClosed   bool
}

// inflight is a request waiting for its response.
type inflight struct {
	corrID int32
	req    kmsg.Request
	sent   time.Time
	done   func(kmsg.Response, error)
}

type eventKind int

const (
	evDialed eventKind = iota
	evFrame
	evReadErr
)

// event is what dialer and reader goroutines tell the network goroutine.
type event struct {
	c     *conn
	kind  eventKind
	nc    net.Conn
	frame []byte
	err   error
}

// nodeState is ClusterConnectionStates' per-node backoff.
type nodeState struct {
	lastAttempt time.Time
	backoff     time.Duration
	failures    int
	connected   bool // had a connection before: the next one is a reconnect
	addrIndex   int  // which of the host's addresses to try next
}

type topicPartition struct {
	topic     string
	partition int32
}

type partitionMeta struct {
	leader int32
	err    int16
}

type topicMeta struct {
	id         [16]byte
	err        int16
	partitions []partitionMeta // by partition number
}

// batch is a ProducerBatch: records for one partition sent in one request.
type batch struct {
	tp       topicPartition
	recs     []*pending
	bytes    int
	created  time.Time
	attempts int
	retryAt  time.Time
	inflight bool
}

// disconnectedError is what in-flight requests of a closed connection get;
// it is retriable, as Java's NetworkException.
type disconnectedError struct {
	node   int32
	reason closeReason
	err    error
}

func (e *disconnectedError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("disconnected from node %d (%s): %v", e.node, e.reason, e.err)
	}
	return fmt.Sprintf("disconnected from node %d (%s)", e.node, e.reason)
}

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
	stopping     bool
}

func newSender(p *Producer) (*sender, error) {
	s := &sender{
		p:        p,
		brokers:  map[int32]Node{},
		conns:    map[int32]*conn{},
		nodes:    map[int32]*nodeState{},
		topics:   map[string]*topicMeta{},
		wanted:   map[string]bool{},
		waiting:  map[string][]*pending{},
		batches:  map[topicPartition][]*batch{},
		stickies: map[string]*sticky{},
		mdNeed:   true,
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
	// KafkaProducer's Sender connects to the bootstrap servers at once
	// (kdiag's model, DEVELOPERS.md step 1); the metadata request goes to
	// the first that is ready.
	for _, n := range s.bootstrap {
		s.connect(n, now)
	}
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
		case <-s.p.wake:
		case <-timer.C:
		case <-s.p.stop:
			s.shutdown()
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
	s.sendProduce(now, flushing, soon)
	// Requests sent just now have deadlines too.
	for _, c := range s.conns {
		if len(c.inflight) > 0 {
			soon(c.inflight[0].sent.Add(s.cfg().RequestTimeout))
		}
	}
	return next
}

// route puts a record into its partition's batch, or parks it until the
// metadata knows its topic (KafkaProducer.waitOnMetadata).
func (s *sender) route(pr *pending, now time.Time) {
	tm := s.topics[pr.topic]
	if tm == nil || tm.err != 0 || len(tm.partitions) == 0 {
		if !s.wanted[pr.topic] || tm != nil {
			s.mdNeed = true
		}
		s.wanted[pr.topic] = true
		s.waiting[pr.topic] = append(s.waiting[pr.topic], pr)
		return
	}
	var part int32
	if pr.rec.key != nil {
		part = keyPartition(pr.rec.key, len(tm.partitions))
	} else {
		var avail []int32
		for i, pm := range tm.partitions {
			if pm.leader >= 0 {
				avail = append(avail, int32(i))
			}
		}
		if len(avail) == 0 {
			for i := range tm.partitions {
				avail = append(avail, int32(i))
			}
		}
		st := s.stickies[pr.topic]
		if st == nil {
			st = &sticky{}
			s.stickies[pr.topic] = st
		}
		part = st.next(avail, pr.size, s.cfg().BatchSize)
	}
	pr.partition = part
	tp := topicPartition{pr.topic, part}
	q := s.batches[tp]
	if n := len(q); n > 0 {
		last := q[n-1]
		if !last.inflight && last.attempts == 0 && last.bytes+pr.size <= s.cfg().BatchSize {
			last.recs = append(last.recs, pr)
			last.bytes += pr.size
			return
		}
	}
	s.batches[tp] = append(q, &batch{tp: tp, recs: []*pending{pr}, bytes: pr.size, created: now})
}

// expire fails what has waited longer than delivery.timeout.ms.
func (s *sender) expire(now time.Time, soon func(time.Time)) {
	dt := s.cfg().DeliveryTimeout
	for topic, recs := range s.waiting {
		keep := recs[:0]
		for _, pr := range recs {
			if now.Sub(pr.created) >= dt {
				s.complete(pr, RecordMetadata{Topic: topic, Partition: -1, Offset: -1},
					&TimeoutError{Msg: fmt.Sprintf("Topic %s not present in metadata after %d ms.", topic, dt.Milliseconds())})
				continue
			}
			soon(pr.created.Add(dt))
			keep = append(keep, pr)
		}
		if len(keep) == 0 {
			delete(s.waiting, topic)
		} else {
			s.waiting[topic] = keep
		}
	}
	for tp, q := range s.batches {
		keep := q[:0]
		for _, b := range q {
			if !b.inflight && now.Sub(b.created) >= dt {
				s.failBatch(b, &TimeoutError{Msg: fmt.Sprintf("Expiring %d record(s) for %s-%d:%d ms has passed since batch creation",
					len(b.recs), tp.topic, tp.partition, now.Sub(b.created).Milliseconds())})
				continue
			}
			if !b.inflight {
				soon(b.created.Add(dt))
			}
			keep = append(keep, b)
		}
		if len(keep) == 0 {
			delete(s.batches, tp)
		} else {
			s.batches[tp] = keep
		}
	}
}

// checkConnections closes idle connections (Selector's IdleExpiryManager)
// and those whose oldest request timed out (NetworkClient).
func (s *sender) checkConnections(now time.Time, soon func(time.Time)) {
	idle := s.cfg().ConnectionsMaxIdle
	for _, c := range s.sortedConns() {
		if c.state == stateConnecting {
			continue
		}
		if len(c.inflight) > 0 {
			deadline := c.inflight[0].sent.Add(s.cfg().RequestTimeout)
			if !now.Before(deadline) {
				s.p.log.Info(fmt.Sprintf("Disconnecting from node %d due to request timeout.", c.node.ID))
				s.closeConn(c, closeTimeout, nil, now)
				continue
			}
			soon(deadline)
			continue
		}
		if idle < 0 {
			continue
		}
		deadline := c.lastActive.Add(idle)
		if !now.Before(deadline) {
			s.p.log.Debug(fmt.Sprintf("About to close the idle connection from %d due to being idle for %d millis",
				c.node.ID, now.Sub(c.lastActive).Milliseconds()))
			s.closeConn(c, closeIdle, nil, now)
			continue
		}
		soon(deadline)
	}
}

func (s *sender) sortedConns() []*conn {
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.ID < out[j].node.ID })
	return out
}

// clusterNodes are the nodes metadata may be fetched from: the bootstrap
// servers until the first response, then the brokers it listed.
func (s *sender) clusterNodes() []Node {
	if !s.haveMeta {
		return s.bootstrap
	}
	ids := make([]int32, 0, len(s.brokers))
	for id := range s.brokers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]Node, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.brokers[id])
	}
	return out
}

// maybeUpdateMetadata is DefaultMetadataUpdater.maybeUpdate: when an update
// is due, send METADATA to the least loaded node, connecting if needed.
func (s *sender) maybeUpdateMetadata(now time.Time, soon func(time.Time)) {
	if s.mdInProgress || s.stopping {
		return
	}
	var due time.Time
	if s.mdNeed {
		due = s.mdAttempt.Add(s.cfg().RetryBackoff)
	} else {
		due = s.mdLast.Add(s.cfg().MetadataMaxAge)
	}
	if now.Before(due) {
		soon(due)
		return
	}
	nodes := s.clusterNodes()
	var ready, connecting *conn
	var canConnect *Node
	off := rand.IntN(len(nodes))
	for i := range nodes {
		n := nodes[(off+i)%len(nodes)]
		c := s.conns[n.ID]
		switch {
		case c != nil && c.state == stateReady && len(c.inflight) < s.cfg().MaxInFlight:
			if ready == nil || len(c.inflight) < len(ready.inflight) {
				ready = c
			}
		case c != nil:
			connecting = c
		case canConnect == nil && s.canConnect(n.ID, now):
			canConnect = &nodes[(off+i)%len(nodes)]
		}
	}
	switch {
	case ready != nil:
		s.sendMetadata(ready, now)
	case connecting != nil:
		// Wait for it: an event wakes us.
	case canConnect != nil:
		s.p.log.Debug(fmt.Sprintf("Initialize connection to node %s for sending metadata request", *canConnect))
		s.connect(*canConnect, now)
	default:
		s.p.log.Debug("Give up sending metadata request since no node is available")
		soon(now.Add(s.cfg().ReconnectBackoff))
	}
}

func (s *sender) sendMetadata(c *conn, now time.Time) {
	topics := make([]string, 0, len(s.wanted))
	for t := range s.wanted {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	v, ok := s.version(c, keyMetadata, 1)
	if !ok {
		s.p.log.Error(fmt.Sprintf("Node %d does not support METADATA v1 or later; cannot fetch metadata from it", c.node.ID))
		s.mdAttempt = now
		return
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = v
	req.Topics = []kmsg.MetadataRequestTopic{} // non-null and empty: no topics, just brokers
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = s.cfg().AllowAutoTopicCreation
	var desc []string
	for _, t := range topics {
		desc = append(desc, fmt.Sprintf("MetadataRequestTopic(topicId=%s, name='%s')", base64.RawURLEncoding.EncodeToString(make([]byte, 16)), t))
	}
	s.p.log.Debug(fmt.Sprintf("Sending metadata request MetadataRequestData(topics=[%s], allowAutoTopicCreation=%t, includeClusterAuthorizedOperations=false, includeTopicAuthorizedOperations=false) to node %s",
		strings.Join(desc, ", "), req.AllowAutoTopicCreation, c.node))
	s.mdInProgress = true
	s.mdAttempt = now
	s.p.stats.metadata.Add(1)
	s.request(c, req, now, func(resp kmsg.Response, err error) {
		s.mdInProgress = false
		if err != nil {
			s.mdNeed = true
			return
		}
		s.onMetadata(resp.(*kmsg.MetadataResponse), time.Now())
	})
}

func (s *sender) onMetadata(resp *kmsg.MetadataResponse, now time.Time) {
	if len(resp.Brokers) == 0 {
		s.mdNeed = true
		return
	}
	first := !s.haveMeta
	s.haveMeta = true
	s.brokers = map[int32]Node{}
	for _, b := range resp.Brokers {
		s.brokers[b.NodeID] = Node{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack}
	}
	problems := map[string]string{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		tm := &topicMeta{id: t.TopicID, err: t.ErrorCode}
		if t.ErrorCode != 0 {
			problems[name] = errName(t.ErrorCode)
		}
		maxP := int32(-1)
		for _, p := range t.Partitions {
			if p.Partition >= 0 && p.Partition < maxPartitions {
				maxP = max(maxP, p.Partition)
			}
		}
		tm.partitions = make([]partitionMeta, maxP+1)
		for i := range tm.partitions {
			tm.partitions[i].leader = -1
		}
		for _, p := range t.Partitions {
			if p.Partition < 0 || p.Partition >= maxPartitions {
				continue // not a partition number a broker sends; ignore rather than index with it
			}
			leader := p.Leader
			if p.ErrorCode != 0 && p.ErrorCode != kerr.ReplicaNotAvailable.Code {
				leader = -1
			}
			tm.partitions[p.Partition] = partitionMeta{leader: leader, err: p.ErrorCode}
		}
		s.topics[name] = tm
	}
	if len(problems) > 0 {
		names := make([]string, 0, len(problems))
		for n := range problems {
			names = append(names, n+"="+problems[n])
		}
		sort.Strings(names)
		s.p.log.Warn(fmt.Sprintf("The metadata response from the cluster reported a recoverable issue: {%s}", strings.Join(names, ", ")))
	}
	var nodes []string
	for _, n := range s.clusterNodes() {
		nodes = append(nodes, n.String())
	}
	s.p.log.Debug(fmt.Sprintf("Updated cluster metadata: nodes=[%s], topics=%d", strings.Join(nodes, ", "), len(s.topics)))
	s.mdLast = now
	s.mdNeed = false
	waiting := s.waiting
	s.waiting = map[string][]*pending{}
	for _, recs := range waiting {
		for _, pr := range recs {
			s.route(pr, now)
		}
	}
	if len(s.waiting) > 0 {
		s.mdNeed = true // still unknown: ask again after retry.backoff.ms
	}
	if first {
		// kdiag's model, DEVELOPERS.md step 2: once it knows the brokers it
		// connects to them.
		for _, n := range s.clusterNodes() {
			if s.conns[n.ID] == nil && s.canConnect(n.ID, now) {
				s.connect(n, now)
			}
		}
	}
}

// sendProduce drains ready batches into one PRODUCE request per leader, as
// RecordAccumulator.ready/drain and Sender.sendProduceRequests do.
func (s *sender) sendProduce(now time.Time, flushing bool, soon func(time.Time)) {
	if s.stopping {
		return
	}
	cfg := s.cfg()
	ready := map[int32][]topicPartition{}
	for tp, q := range s.batches {
		var b *batch
		for _, x := range q {
			if !x.inflight {
				b = x
				break
			}
		}
		if b == nil {
			continue
		}
		tm := s.topics[tp.topic]
		if tm == nil || int(tp.partition) >= len(tm.partitions) || tm.partitions[tp.partition].leader < 0 {
			s.mdNeed = true
			continue
		}
		if b.attempts > 0 && now.Before(b.retryAt) {
			soon(b.retryAt)
			continue
		}
		full := len(q) > 1 || b.bytes >= cfg.BatchSize
		lingered := !now.Before(b.created.Add(cfg.Linger))
		if !full && !lingered && !flushing {
			soon(b.created.Add(cfg.Linger))
			continue
		}
		leader := tm.partitions[tp.partition].leader
		ready[leader] = append(ready[leader], tp)
	}
	leaders := make([]int32, 0, len(ready))
	for l := range ready {
		leaders = append(leaders, l)
	}
	sort.Slice(leaders, func(i, j int) bool { return leaders[i] < leaders[j] })
	for _, leader := range leaders {
		c := s.conns[leader]
		if c == nil {
			n, ok := s.brokers[leader]
			if !ok {
				s.mdNeed = true
				continue
			}
			if s.canConnect(leader, now) {
				s.connect(n, now) // NetworkClient.ready: connect where we must send
			} else {
				soon(s.nodes[leader].lastAttempt.Add(s.nodes[leader].backoff))
			}
			continue
		}
		if c.state != stateReady || len(c.inflight) >= cfg.MaxInFlight {
			continue
		}
		tps := ready[leader]
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].topic != tps[j].topic {
				return tps[i].topic < tps[j].topic
			}
			return tps[i].partition < tps[j].partition
		})
		var batches []*batch
		size := 0
		for _, tp := range tps {
			for _, b := range s.batches[tp] {
				if b.inflight {
					continue
				}
				if len(batches) > 0 && size+b.bytes > cfg.MaxRequestSize {
					break
				}
				b.inflight = true
				batches = append(batches, b)
				size += b.bytes
				break // one batch per partition per request
			}
		}
		if len(batches) > 0 {
			s.produce(c, batches, now)
		}
	}
}

// produce sends one PRODUCE request (API key 0) with a RecordBatch per
// partition.
func (s *sender) produce(c *conn, batches []*batch, now time.Time) {
	cfg := s.cfg()
	v, ok := s.version(c, keyProduce, 3) // v3 is the first with RecordBatch v2
	if !ok {
		for _, b := range batches {
			s.removeBatch(b)
			s.failBatch(b, fmt.Errorf("node %d does not support PRODUCE v3 or later (RecordBatch v2)", c.node.ID))
		}
		return
	}
	if v >= 13 {
		// Produce v13 names topics by ID (KIP-516); without an ID from
		// metadata (Metadata < v10) stay on v12.
		for _, b := range batches {
			if s.topics[b.tp.topic].id == ([16]byte{}) {
				v = 12
				break
			}
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = cfg.Acks
	req.TimeoutMillis = int32(min(cfg.RequestTimeout.Milliseconds(), math.MaxInt32))
	byTopic := map[string]int{}
	for _, b := range batches {
		recs := make([]batchRecord, len(b.recs))
		for i, pr := range b.recs {
			recs[i] = pr.rec
		}
		i, ok := byTopic[b.tp.topic]
		if !ok {
			t := kmsg.NewProduceRequestTopic()
			t.Topic = b.tp.topic
			t.TopicID = s.topics[b.tp.topic].id
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[b.tp.topic] = i
		}
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = b.tp.partition
		p.Records = encodeBatch(recs, s.p.compressor, v)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
		s.p.stats.recordsSent.Add(int64(len(b.recs)))
	}
	s.p.stats.produce.Add(1)
	if cfg.Acks == 0 {
		// No response comes for acks=0: the records are done once written
		// (Java completes them in handleCompletedSends with offset -1).
		if s.write(c, req, now) {
			for _, b := range batches {
				s.removeBatch(b)
				s.completeBatch(b, -1, -1, nil)
			}
		} else {
			for _, b := range batches {
				s.retryBatch(b, &disconnectedError{node: c.node.ID, reason: closeWriteFailed}, time.Now())
			}
		}
		return
	}
	s.request(c, req, now, func(resp kmsg.Response, err error) {
		now := time.Now()
		if err != nil {
			for _, b := range batches {
				s.retryBatch(b, err, now)
			}
			return
		}
		s.onProduce(resp.(*kmsg.ProduceResponse), batches, now)
	})
}

func (s *sender) onProduce(resp *kmsg.ProduceResponse, batches []*batch, now time.Time) {
	type key struct {
		topic string
		id    [16]byte
		part  int32
	}
	got := map[key]*kmsg.ProduceResponseTopicPartition{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if resp.Version >= 13 {
				got[key{id: t.TopicID, part: p.Partition}] = p
			} else {
				got[key{topic: t.Topic, part: p.Partition}] = p
			}
		}
	}
	for _, b := range batches {
		k := key{topic: b.tp.topic, part: b.tp.partition}
		if resp.Version >= 13 {
			k = key{id: s.topics[b.tp.topic].id, part: b.tp.partition}
		}
		p := got[k]
		if p == nil {
			s.retryBatch(b, fmt.Errorf("no response for partition %s-%d", b.tp.topic, b.tp.partition), now)
			continue
		}
		if p.ErrorCode != 0 {
			err := kerr.ErrorForCode(p.ErrorCode)
			if p.ErrorMessage != nil {
				err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
			}
			s.retryBatch(b, err, now)
			continue
		}
		s.removeBatch(b)
		s.completeBatch(b, p.BaseOffset, p.LogAppendTime, nil)
	}
}

// retryBatch re-enqueues a failed batch at the head of its partition's
// queue after retry.backoff.ms (RecordAccumulator.reenqueue) if the error is
// retriable, retries remain and delivery.timeout.ms has not passed;
// otherwise the batch fails.
func (s *sender) retryBatch(b *batch, err error, now time.Time) {
	cfg := s.cfg()
	var de *disconnectedError
	retriable := errors.As(err, &de) || kerr.IsRetriable(err)
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.NotLeaderForPartition) ||
		errors.Is(err, kerr.LeaderNotAvailable) || de != nil {
		s.mdNeed = true
	}
	if !retriable || b.attempts >= cfg.Retries || now.Sub(b.created) >= cfg.DeliveryTimeout || s.stopping {
		s.removeBatch(b)
		if s.stopping && retriable {
			err = ErrClosed
		}
		s.failBatch(b, err)
		return
	}
	b.attempts++
	backoff := cfg.RetryBackoff << min(b.attempts-1, 20)
	if backoff > cfg.RetryBackoffMax || backoff <= 0 {
		backoff = cfg.RetryBackoffMax
	}
	b.retryAt = now.Add(jitter(backoff))
	b.inflight = false
	s.p.log.Warn(fmt.Sprintf("Got error produce response on topic-partition %s-%d, retrying (%d attempts left). Error: %v",
		b.tp.topic, b.tp.partition, cfg.Retries-b.attempts, err))
	// Move it to the head of its queue, so it goes before younger batches.
	q := s.batches[b.tp]
	for i, x := range q {
		if x == b {
			copy(q[1:i+1], q[:i])
			q[0] = b
			break
		}
	}
}

func (s *sender) removeBatch(b *batch) {
	q := s.batches[b.tp]
	for i, x := range q {
		if x == b {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.batches, b.tp)
	} else {
		s.batches[b.tp] = q
	}
}

func (s *sender) completeBatch(b *batch, baseOffset, appendTime int64, err error) {
	for i, pr := range b.recs {
		md := RecordMetadata{Topic: b.tp.topic, Partition: b.tp.partition, Offset: -1, Timestamp: time.UnixMilli(pr.rec.timestamp)}
		if baseOffset >= 0 {
			md.Offset = baseOffset + int64(i)
		}
		if appendTime >= 0 {
			md.Timestamp = time.UnixMilli(appendTime)
		}
		s.complete(pr, md, err)
	}
}

func (s *sender) failBatch(b *batch, err error) {
	s.completeBatch(b, -1, -1, err)
}

// complete runs a record's callback on the network goroutine, after
// kdiag.callback.delay.ms: while it runs nothing else on this goroutine
// does, which is the point (a stalled Sender thread).
func (s *sender) complete(pr *pending, md RecordMetadata, err error) {
	if err != nil {
		s.p.stats.recordsFailed.Add(1)
	} else {
		s.p.stats.recordsAcked.Add(1)
	}
	if d := s.cfg().CallbackDelay; d > 0 && !s.stopping {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.p.stop: // Close cuts the artificial delay short
		}
		t.Stop()
	}
	if pr.cb != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.p.log.Error(fmt.Sprintf("Error executing user-provided callback on message for topic-partition '%s-%d': %v\n%s",
						md.Topic, md.Partition, r, debug.Stack()))
				}
			}()
			pr.cb(md, err)
		}()
	}
	s.p.done(pr)
}

// version is the highest version of key both sides support, at least min;
// capped at what kmsg can encode.
func (s *sender) version(c *conn, key int16, minV int16) (int16, bool) {
	r, ok := c.versions[key]
	if !ok {
		return 0, false
	}
	var kmax int16
	switch key {
	case keyProduce:
		kmax = (&kmsg.ProduceRequest{}).MaxVersion()
	case keyMetadata:
		kmax = (&kmsg.MetadataRequest{}).MaxVersion()
	case keyAPIVersions:
		kmax = (&kmsg.ApiVersionsRequest{}).MaxVersion()
	}
	v := min(r[1], kmax)
	if v < r[0] || v < minV {
		return 0, false
	}
	return v, true
}

func (s *sender) canConnect(id int32, now time.Time) bool {
	if s.stopping {
		return false
	}
	ns := s.nodes[id]
	return ns == nil || !now.Before(ns.lastAttempt.Add(ns.backoff))
}

// connect starts a connection: the address is resolved here, on the network
// goroutine, as ClusterConnectionStates does on the Sender thread; the TCP
// handshake runs in a dialer goroutine that reports back.
func (s *sender) connect(n Node, now time.Time) {
	ns := s.nodes[n.ID]
	if ns == nil {
		ns = &nodeState{}
		s.nodes[n.ID] = ns
	}
	ns.lastAttempt = now
	ip, desc, err := s.resolve(n.Host, ns.addrIndex)
	if err != nil {
		s.p.log.Warn(fmt.Sprintf("Error connecting to node %s", n), "err", err)
		s.backoff(ns)
		s.p.stats.connectFailures.Add(1)
		return
	}
	s.nextConnID++
	c := &conn{
		id:     s.nextConnID,
		node:   n,
		desc:   desc,
		ip:     ip,
		reads:  make(chan struct{}, s.cfg().MaxInFlight+1),
		closed: make(chan struct{}),
	}
	s.conns[n.ID] = c
	s.p.log.Debug(fmt.Sprintf("Initiating connection to node %s using address %s", n, desc))
	s.p.wg.Add(1)
	go func() {
		defer s.p.wg.Done()
		d := net.Dialer{Timeout: s.cfg().SocketConnectionSetupTimeout}
		nc, err := d.DialContext(s.p.ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(n.Port)))
		select {
		case s.p.events <- event{c: c, kind: evDialed, nc: nc, err: err}:
		case <-c.closed:
			if nc != nil {
				nc.Close()
			}
		}
	}()
}

// resolve returns the first address of host and Java's description of it
// (InetAddress.toString: "localhost/127.0.0.1", "/127.0.0.1" for a literal).
//
// With several addresses it takes the i-th (modulo their number), IPv4
// first as the JVM orders them by default (java.net.preferIPv6Addresses=
// false): after a failed attempt the next one is tried, as
// client.dns.lookup=use_all_dns_ips does.
func (s *sender) resolve(host string, i int) (ip, desc string, err error) {
	if a := net.ParseIP(host); a != nil {
		return a.String(), "/" + a.String(), nil
	}
	ctx, cancel := context.WithTimeout(s.p.ctx, s.cfg().SocketConnectionSetupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", "", err
	}
	if len(addrs) == 0 {
		return "", "", fmt.Errorf("no address for %s", host)
	}
	sort.SliceStable(addrs, func(a, b int) bool { return addrs[a].IP.To4() != nil && addrs[b].IP.To4() == nil })
	a := addrs[i%len(addrs)].IP.String()
	return a, host + "/" + a, nil
}

// backoff is ClusterConnectionStates.updateReconnectBackoff: exponential
// from reconnect.backoff.ms to reconnect.backoff.max.ms, 20% jitter.
func (s *sender) backoff(ns *nodeState) {
	cfg := s.cfg()
	b := cfg.ReconnectBackoff << min(ns.failures, 30)
	if b > cfg.ReconnectBackoffMax || b < 0 {
		b = cfg.ReconnectBackoffMax
	}
	ns.backoff = jitter(b)
	ns.failures++
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (s *sender) handle(ev event) {
	c := ev.c
	now := time.Now()
	if c.isClosed {
		if ev.nc != nil {
			ev.nc.Close()
		}
		return
	}
	switch ev.kind {
	case evDialed:
		if ev.err != nil {
			s.p.log.Info(fmt.Sprintf("Node %d disconnected.", c.node.ID))
			s.p.log.Warn(fmt.Sprintf("Connection to node %d (%s:%d) could not be established. Node may not be available.",
				c.node.ID, c.desc, c.node.Port), "err", ev.err)
			s.p.stats.connectFailures.Add(1)
			s.nodes[c.node.ID].addrIndex++
			s.closeConn(c, closeConnectFailed, ev.err, now)
			return
		}
		c.nc = ev.nc
		c.state = stateCheckingAPIVersions
		c.lastActive = now
		s.p.stats.opened.Add(1)
		s.p.stats.open.Add(1)
		if ns := s.nodes[c.node.ID]; ns.connected {
			s.p.stats.reconnects.Add(1)
		} else {
			ns.connected = true
		}
		s.p.log.Debug(fmt.Sprintf("Completed connection to node %d. Fetching API versions.", c.node.ID))
		s.p.wg.Add(1)
		go s.reader(c, ev.nc)
		s.p.log.Debug(fmt.Sprintf("Initiating API versions fetch from node %d.", c.node.ID))
		s.apiVersions(c, min(apiVersionsFirst, (&kmsg.ApiVersionsRequest{}).MaxVersion()), now)
	case evFrame:
		if len(c.inflight) == 0 {
			s.closeConn(c, closeProtocol, errors.New("response without a request"), now)
			return
		}
		in := c.inflight[0]
		c.inflight = c.inflight[1:]
		c.lastActive = now
		resp, err := parseResponse(ev.frame, in.corrID, in.req)
		if err != nil {
			s.closeConn(c, closeProtocol, err, now)
			in.done(nil, &disconnectedError{node: c.node.ID, reason: closeProtocol, err: err})
			return
		}
		in.done(resp, nil)
	case evReadErr:
		reason := closeProtocol
		switch {
		case errors.Is(ev.err, io.EOF), errors.Is(ev.err, io.ErrUnexpectedEOF):
			reason = closePeerEOF
		case errors.Is(ev.err, syscall.ECONNRESET), errors.Is(ev.err, syscall.EPIPE):
			reason = closePeerReset
		}
		s.closeConn(c, reason, ev.err, now)
	}
}

// reader reads responses from one connection. With the poll reader it reads
// all the time, so a FIN is seen as soon as it arrives (Java's Selector).
// With on-demand it reads only when the network goroutine has sent a
// request (a token in c.reads): a FIN on an idle connection stays unread and
// the socket in CLOSE_WAIT.
func (s *sender) reader(c *conn, nc net.Conn) {
	defer s.p.wg.Done()
	onDemand := s.cfg().Reader == ReaderOnDemand
	for {
		if onDemand {
			select {
			case <-c.reads:
			case <-c.closed:
				return
			}
		}
		frame, err := readFrame(nc)
		ev := event{c: c, kind: evFrame, frame: frame}
		if err != nil {
			ev = event{c: c, kind: evReadErr, err: err}
		}
		// Blocks while the network goroutine is busy (a slow callback):
		// the FIN waits here, unprocessed, and the socket is not closed.
		select {
		case s.p.events <- ev:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// apiVersions sends APIVERSIONS (key 18), the first request on every
// connection, and records the broker's versions.
func (s *sender) apiVersions(c *conn, v int16, now time.Time) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName = "kdiag"
	req.ClientSoftwareVersion = softwareVersion()
	s.request(c, req, now, func(r kmsg.Response, err error) {
		if err != nil {
			return // the connection is closed already
		}
		resp := r.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode == kerr.UnsupportedVersion.Code && v > 0 {
			next := int16(0)
			for _, k := range resp.ApiKeys {
				if k.ApiKey == keyAPIVersions {
					next = min(k.MaxVersion, v-1)
				}
			}
			s.apiVersions(c, next, time.Now())
			return
		}
		if resp.ErrorCode != 0 {
			s.p.log.Warn(fmt.Sprintf("Received error %s from node %d when making an ApiVersionsRequest. Disconnecting.",
				errName(resp.ErrorCode), c.node.ID))
			s.closeConn(c, closeProtocol, kerr.ErrorForCode(resp.ErrorCode), time.Now())
			return
		}
		c.versions = map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			c.versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		c.state = stateReady
		s.nodes[c.node.ID].failures = 0
		var desc []string
		for _, k := range []int16{keyProduce, keyMetadata, keyAPIVersions} {
			r, ok := c.versions[k]
			if !ok {
				desc = append(desc, fmt.Sprintf("%s(%d): UNSUPPORTED", kmsg.NameForKey(k), k))
				continue
			}
			use, _ := s.version(c, k, 0)
			desc = append(desc, fmt.Sprintf("%s(%d): %d to %d [usable: %d]", kmsg.NameForKey(k), k, r[0], r[1], use))
		}
		s.p.log.Debug(fmt.Sprintf("Recorded API versions for node %d: (%s)", c.node.ID, strings.Join(desc, ", ")))
	})
}

// request writes req and, when it succeeds, waits for its response.
func (s *sender) request(c *conn, req kmsg.Request, now time.Time, done func(kmsg.Response, error)) {
	corr := s.corr
	if !s.write(c, req, now) {
		done(nil, &disconnectedError{node: c.node.ID, reason: closeWriteFailed})
		return
	}
	c.inflight = append(c.inflight, &inflight{corrID: corr, req: req, sent: now, done: done})
	if s.cfg().Reader == ReaderOnDemand {
		c.reads <- struct{}{}
	}
}

// write frames and writes one request (size, RequestHeader v1 or v2 by
// kmsg.RequestFormatter, body) with the next correlation ID. On failure it
// closes the connection.
func (s *sender) write(c *conn, req kmsg.Request, now time.Time) bool {
	corr := s.corr
	s.corr++
	if s.corr < 0 {
		s.corr = 0
	}
	buf := s.p.formatter.AppendRequest(nil, req, corr)
	_ = c.nc.SetWriteDeadline(now.Add(s.cfg().RequestTimeout))
	if _, err := c.nc.Write(buf); err != nil {
		s.closeConn(c, closeWriteFailed, err, now)
		return false
	}
	c.lastActive = now
	return true
}

// closeConn closes a connection and fails its in-flight requests, which
// retry elsewhere or later, and asks for a metadata update, as
// NetworkClient.processDisconnection does.
func (s *sender) closeConn(c *conn, why closeReason, err error, now time.Time) {
	if c.isClosed {
		return
	}
	c.isClosed = true
	close(c.closed)
	if s.conns[c.node.ID] == c {
		delete(s.conns, c.node.ID)
	}
	if c.nc != nil {
		c.nc.Close()
		s.p.stats.open.Add(-1)
		attrs := []any{"reason", why.String()}
		if err != nil {
			attrs = append(attrs, "err", err.Error())
		}
		switch why {
		case closeIdle:
			s.p.stats.closedIdle.Add(1)
			s.p.log.Debug(fmt.Sprintf("Idle connection to node %d disconnected.", c.node.ID), attrs...)
		case closeShutdown:
			s.p.stats.closedOnClose.Add(1)
			s.p.log.Debug(fmt.Sprintf("Closing connection with %s (channel %d)", c.desc, c.node.ID), attrs...)
		case closePeerEOF, closePeerReset:
			s.p.stats.peerCloses.Add(1)
			s.p.log.Debug(fmt.Sprintf("Connection with %s (channel %d) disconnected", c.desc, c.node.ID), attrs...)
			s.p.log.Info(fmt.Sprintf("Node %d disconnected.", c.node.ID))
		default:
			s.p.stats.closedOnError.Add(1)
			s.p.log.Debug(fmt.Sprintf("Connection with %s (channel %d) disconnected", c.desc, c.node.ID), attrs...)
			if why != closeTimeout {
				s.p.log.Info(fmt.Sprintf("Node %d disconnected.", c.node.ID))
			}
		}
	}
	if ns := s.nodes[c.node.ID]; ns != nil {
		ns.lastAttempt = now
		s.backoff(ns)
	}
	in := c.inflight
	c.inflight = nil
	for _, r := range in {
		s.p.log.Debug(fmt.Sprintf("Cancelled in-flight %s request with correlation id %d due to node %d being disconnected (elapsed time since send: %dms)",
			strings.ToUpper(kmsg.NameForKey(r.req.Key())), r.corrID, c.node.ID, now.Sub(r.sent).Milliseconds()))
		r.done(nil, &disconnectedError{node: c.node.ID, reason: why, err: err})
	}
	if !s.stopping {
		// The disconnect may be the result of stale metadata
		// (DefaultMetadataUpdater.handleServerDisconnect).
		s.mdNeed = true
	}
}

// shutdown fails what is left, closes every connection and waits for the
// reader and dialer goroutines.
func (s *sender) shutdown() {
	s.stopping = true
	now := time.Now()
	for _, c := range s.sortedConns() {
		s.closeConn(c, closeShutdown, nil, now)
	}
	recs, _ := s.p.takeIncoming()
	for _, pr := range recs {
		s.complete(pr, RecordMetadata{Topic: pr.topic, Partition: -1, Offset: -1}, ErrClosed)
	}
	for _, list := range s.waiting {
		for _, pr := range list {
			s.complete(pr, RecordMetadata{Topic: pr.topic, Partition: -1, Offset: -1}, ErrClosed)
		}
	}
	s.waiting = nil
	for _, q := range s.batches {
		for _, b := range q {
			s.failBatch(b, ErrClosed)
		}
	}
	s.batches = nil
	s.p.cancel()
	// Dialers and readers end on their own once their conn is closed; drain
	// events so none blocks on the channel meanwhile.
	done := make(chan struct{})
	go func() { s.p.wg.Wait(); close(done) }()
	for {
		select {
		case ev := <-s.p.events:
			if ev.nc != nil {
				ev.nc.Close()
			}
		case <-done:
			s.p.log.Debug("Kafka producer I/O thread has shut down")
			return
		}
	}
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

// softwareVersion is ApiVersions v3's ClientSoftwareVersion: the module
// version kdiag was built as, or "devel"; it must match
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func softwareVersion() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = strings.TrimPrefix(bi.Main.Version, "v")
	}
	ok := len(v) > 0
	for i, r := range v {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (r != '-' && r != '.' || i == 0 || i == len(v)-1) {
			ok = false
		}
	}
	if !ok {
		return "devel"
	}
	return v
}
