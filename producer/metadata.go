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
