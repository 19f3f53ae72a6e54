// PRODUCE: draining ready batches into one request per leader, and what
// its response does to each batch.

package producer

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sendProduce drains ready batches into one PRODUCE request per leader, as
// RecordAccumulator.ready/drain and Sender.sendProduceRequests do.
func (s *sender) sendProduce(now time.Time, flushing bool, soon func(time.Time)) {
	if s.stopping {
		return
	}
	cfg := s.cfg()
	if cfg.EnableIdempotence && s.usesKey(keyInitProducerID) && !s.havePID {
		return // maybeInitProducerID first, as Sender does
	}
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
		if s.havePID && !b.seqSet {
			// The batch keeps its sequence on retries
			// (ProducerBatch.setProducerState, once).
			b.seq, b.seqSet = s.sequences[b.tp], true
			s.sequences[b.tp] += int32(len(b.recs))
		}
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = b.tp.partition
		p.Records = encodeBatch(recs, s.p.compressor, v, producerState{id: s.pid, epoch: s.epoch, seq: b.seq})
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
