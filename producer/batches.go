// The record accumulator: records into per-partition batches, expiry after
// delivery.timeout.ms, retries, and completing records (their callbacks run
// here, on the network goroutine).

package producer

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type topicPartition struct {
	topic     string
	partition int32
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
	// seq is the batch's first sequence number, set when it is first sent
	// by an idempotent producer (seqSet).
	seq    int32
	seqSet bool
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
	s.batches[tp] = append(q, &batch{tp: tp, recs: []*pending{pr}, bytes: pr.size, created: now, seq: -1})
}

// expire fails a record that has waited for its topic's metadata longer
// than max.block.ms (KafkaProducer.waitOnMetadata, in send(), at 2.1.1 and
// 3.9.0 alike) and a batch not sent within delivery.timeout.ms.
func (s *sender) expire(now time.Time, soon func(time.Time)) {
	dt := s.cfg().DeliveryTimeout
	mb := s.cfg().MaxBlock
	for topic, recs := range s.waiting {
		keep := recs[:0]
		for _, pr := range recs {
			if now.Sub(pr.created) >= mb {
				s.complete(pr, RecordMetadata{Topic: topic, Partition: -1, Offset: -1},
					&TimeoutError{Msg: fmt.Sprintf("Topic %s not present in metadata after %d ms.", topic, mb.Milliseconds())})
				continue
			}
			soon(pr.created.Add(mb))
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
