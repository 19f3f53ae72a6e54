// Metadata: when to refresh it and from which node (DefaultMetadataUpdater),
// the METADATA request, and what a response changes.

package producer

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxPartitions bounds the partition numbers taken from a METADATA response,
// so that a bad response cannot make us allocate without limit.
const maxPartitions = 1 << 20

type topicMeta struct {
	id         [16]byte
	err        int16
	partitions []partitionMeta // by partition number
}

type partitionMeta struct {
	leader int32
	err    int16
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
// is due, send METADATA to the least loaded node (leastLoaded); if it
// cannot take it, wait while any connection is being set up, else connect
// to that node (2.1.1 and 3.9.0 alike).
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
	n := s.leastLoaded(now)
	switch {
	case n == nil:
		s.p.log.Debug("Give up sending metadata request since no node is available")
		soon(now.Add(s.cfg().ReconnectBackoff))
	case s.canSend(n.ID):
		s.sendMetadata(s.conns[n.ID], now)
	case s.anyConnecting():
		// "If there's any connection establishment underway, wait until
		// it completes": poll again after reconnect.backoff.ms.
		soon(now.Add(s.cfg().ReconnectBackoff))
	case s.conns[n.ID] == nil && s.canConnect(n.ID, now):
		s.p.log.Debug(fmt.Sprintf("Initialize connection to node %s for sending metadata request", *n))
		s.connect(*n, now)
		soon(now.Add(s.cfg().ReconnectBackoff))
	}
}

// canSend is NetworkClient.canSendRequest: connected, API versions known,
// and room for one more request in flight.
func (s *sender) canSend(id int32) bool {
	c := s.conns[id]
	return c != nil && c.state == stateReady && len(c.inflight) < s.cfg().MaxInFlight
}

// anyConnecting is ClusterConnectionStates.isAnyNodeConnecting: a TCP
// connection underway (not one fetching API versions).
func (s *sender) anyConnecting() bool {
	for _, c := range s.conns {
		if c.state == stateConnecting {
			return true
		}
	}
	return false
}

// leastLoaded is NetworkClient.leastLoadedNode, in the model's version,
// over the bootstrap servers until the first metadata and the brokers after
// it, from a random start (as Java's randOffset):
//
//   - 3.9.0: a ready node with no request in flight at once; else the
//     ready one with the fewest; else one being connected; else the one
//     that can connect whose last attempt is oldest. So while one
//     bootstrap connection is being set up, no other is started: it
//     contacts one bootstrap server.
//   - 2.1.1: a ready node with no request in flight at once; else the first
//     node, not in reconnect backoff, with fewer requests in flight than
//     any before it, ready or not. A node whose connection is fetching
//     API versions has that request in flight, so the next poll picks a
//     node with none, and connects to it: before its first metadata it
//     contacts every bootstrap server, one poll after another.
func (s *sender) leastLoaded(now time.Time) *Node {
	nodes := s.clusterNodes()
	if len(nodes) == 0 {
		return nil
	}
	off := rand.IntN(len(nodes))
	if s.cfg().Model == ModelJava21 {
		var found *Node
		least := int(^uint(0) >> 1)
		for i := range nodes {
			n := &nodes[(off+i)%len(nodes)]
			c := s.conns[n.ID]
			inflight := 0
			if c != nil {
				inflight = len(c.inflight)
			}
			if inflight == 0 && c != nil && c.state == stateReady {
				return n
			}
			if s.canConnect(n.ID, now) && inflight < least {
				least, found = inflight, n
			}
		}
		return found
	}
	var ready, connecting, canConnect *Node
	least := int(^uint(0) >> 1)
	for i := range nodes {
		n := &nodes[(off+i)%len(nodes)]
		c := s.conns[n.ID]
		switch {
		case s.canSend(n.ID):
			if len(c.inflight) == 0 {
				return n
			}
			if len(c.inflight) < least {
				least, ready = len(c.inflight), n
			}
		case c != nil:
			connecting = n
		case s.canConnect(n.ID, now):
			if canConnect == nil || s.lastAttempt(canConnect.ID).After(s.lastAttempt(n.ID)) {
				canConnect = n
			}
		}
	}
	switch {
	case ready != nil:
		return ready
	case connecting != nil:
		return connecting
	}
	return canConnect
}

func (s *sender) lastAttempt(id int32) time.Time {
	if ns := s.nodes[id]; ns != nil {
		return ns.lastAttempt
	}
	return time.Time{}
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
	if s.cfg().Model == ModelJava21 {
		// MetadataRequest.Builder.toString at 2.1.1.
		s.p.log.Debug(fmt.Sprintf("Sending metadata request (type=MetadataRequest, topics=%s) to node %s", strings.Join(topics, ","), c.node))
	} else {
		s.p.log.Debug(fmt.Sprintf("Sending metadata request MetadataRequestData(topics=[%s], allowAutoTopicCreation=%t, includeClusterAuthorizedOperations=false, includeTopicAuthorizedOperations=false) to node %s",
			strings.Join(desc, ", "), req.AllowAutoTopicCreation, c.node))
	}
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
	// Neither version connects to the brokers the metadata lists: only to
	// the leaders it sends to (sendProduce) and to the least loaded node
	// for the next metadata.
}
