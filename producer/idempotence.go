// The idempotent producer's ID (INIT_PRODUCER_ID) and KIP-714's
// GET_TELEMETRY_SUBSCRIPTIONS: the two requests kafka-clients 3.9.0 sends
// besides METADATA and PRODUCE (2.1.1 sends neither by default).

package producer

import (
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maybeInitProducerID asks for a producer ID (INIT_PRODUCER_ID, key 22)
// when idempotence is on and there is none: Sender.maybeSendAndPoll-
// TransactionalRequest, to the least loaded node, before any PRODUCE. With
// no node ready it waits for one (awaitNodeReady connects to it).
func (s *sender) maybeInitProducerID(now time.Time, soon func(time.Time)) {
	if !s.cfg().EnableIdempotence || s.havePID || s.pidInFlight || s.stopping || !s.usesKey(keyInitProducerID) {
		return
	}
	n := s.leastLoaded(now)
	if n == nil {
		soon(now.Add(s.cfg().ReconnectBackoff))
		return
	}
	if !s.canSend(n.ID) {
		if s.conns[n.ID] == nil && !s.anyConnecting() && s.canConnect(n.ID, now) {
			s.connect(*n, now)
		}
		soon(now.Add(s.cfg().ReconnectBackoff))
		return
	}
	c := s.conns[n.ID]
	v, ok := s.version(c, keyInitProducerID, 0)
	if !ok {
		s.p.log.Error(fmt.Sprintf("Node %d does not support INIT_PRODUCER_ID; producing without a producer ID", c.node.ID))
		s.havePID = true
		return
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = v
	req.TransactionTimeoutMillis = math.MaxInt32 // no transactional.id: Integer.MAX_VALUE, as TransactionManager
	req.ProducerID, req.ProducerEpoch = -1, -1
	s.pidInFlight = true
	s.request(c, req, now, func(r kmsg.Response, err error) {
		s.pidInFlight = false
		if err != nil {
			return // retried at the next poll
		}
		resp := r.(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 {
			s.p.log.Warn(fmt.Sprintf("Received error %s from node %d for INIT_PRODUCER_ID", errName(resp.ErrorCode), c.node.ID))
			return
		}
		s.pid, s.epoch, s.havePID = resp.ProducerID, resp.ProducerEpoch, true
		s.p.log.Info(fmt.Sprintf("ProducerId set to %d with epoch %d", s.pid, s.epoch))
	})
}

// maybeTelemetry sends GET_TELEMETRY_SUBSCRIPTIONS (key 71, KIP-714) once,
// as kafka-clients 3.9.0's NetworkClient.TelemetrySender does with
// enable.metrics.push=true (its default): to the least loaded node, and
// if it cannot take it, connecting to that node ("for sending telemetry
// request") unless a connection is being set up. Observed on kdiag's
// broker, it is due once the first metadata has come, so its node is a
// broker, connected for it at creation when no other is. The
// subscription's pushes (PUSH_TELEMETRY, every push interval) are not
// modelled.
func (s *sender) maybeTelemetry(now time.Time, soon func(time.Time)) {
	if s.telemetryOut || !s.haveMeta || s.stopping || !s.usesKey(keyGetTelemetry) {
		return
	}
	n := s.leastLoaded(now)
	if n == nil {
		return
	}
	if !s.canSend(n.ID) {
		if s.conns[n.ID] == nil && !s.anyConnecting() && s.canConnect(n.ID, now) {
			s.p.log.Debug(fmt.Sprintf("Initialize connection to node %s for sending telemetry request", *n))
			s.connect(*n, now)
		}
		soon(now.Add(s.cfg().ReconnectBackoff))
		return
	}
	c := s.conns[n.ID]
	v, ok := s.version(c, keyGetTelemetry, 0)
	s.telemetryOut = true
	if !ok {
		return
	}
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.Version = v
	s.request(c, req, now, func(kmsg.Response, error) {})
}

// usesKey says whether the model's client sends requests of key at all.
func (s *sender) usesKey(key int16) bool {
	_, ok := modelVersions[s.cfg().Model][key]
	return ok
}
