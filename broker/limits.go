package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxRecordsPerUserOp is the most metadata records one client operation
// may make on a Kafka controller (QuorumController.MAX_RECORDS_PER_USER_OP,
// 10000): a topic is one TopicRecord, each partition one PartitionRecord,
// each config one ConfigRecord. kfake has no such cap and makes every
// partition asked for at once, about 400 bytes each, so one CreateTopics
// frame asking for 2147483647 partitions would take the broker down.
const maxRecordsPerUserOp = 10000

// excessiveBatch is the controller's message for an operation over the cap
// (EventHandlerExceptionInfo, for BoundedListTooLongException).
const excessiveBatch = "Unable to perform excessively large batch operation."

// keepControl installs fn as a kfake control function for key that kfake
// keeps across requests: fn is replaced by itself before each call, because
// kfake remembers, for each control function, every connection that reached
// it (controlCtx.lastReq) and never forgets one, so a function kept with
// KeepControl for the cluster's life would hold every connection ever made.
func (c *Cluster) keepControl(key kmsg.Key, fn func(kmsg.Request) (kmsg.Response, error, bool)) {
	var self func(kmsg.Request) (kmsg.Response, error, bool)
	self = func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.kf.ControlKey(int16(key), self)
		c.kf.DropControl()
		return fn(req)
	}
	c.kf.ControlKey(int16(key), self)
}

// createTopicsLimit answers, as Kafka's controller does, a CreateTopics
// request that would make more than maxRecordsPerUserOp records: every topic
// gets POLICY_VIOLATION and nothing is created. defaultParts is what kfake
// makes for NumPartitions -1.
func createTopicsLimit(req *kmsg.CreateTopicsRequest, defaultParts int) (kmsg.Response, bool) {
	records := 0
	for _, t := range req.Topics {
		parts := int(t.NumPartitions)
		switch {
		case len(t.ReplicaAssignment) > 0:
			parts = len(t.ReplicaAssignment)
		case parts < 0:
			parts = defaultParts
		}
		records += 1 + parts + len(t.Configs)
		if records > maxRecordsPerUserOp {
			break
		}
	}
	if records <= maxRecordsPerUserOp {
		return nil, false
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode = kerr.PolicyViolation.Code
		rt.ErrorMessage = kmsg.StringPtr(excessiveBatch)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, true
}

// createPartitionsLimit answers a CreatePartitions request that would add
// more than maxRecordsPerUserOp partitions with POLICY_VIOLATION for every
// topic. partitions says how many a topic has now (0 if none), counting no
// further than upTo.
func createPartitionsLimit(req *kmsg.CreatePartitionsRequest, partitions func(topic string, upTo int32) int32) (kmsg.Response, bool) {
	added := 0
	for _, t := range req.Topics {
		if t.Count <= 0 {
			continue
		}
		added += int(t.Count - partitions(t.Topic, t.Count)) // never negative: counted up to Count
		if added > maxRecordsPerUserOp {
			break
		}
	}
	if added <= maxRecordsPerUserOp {
		return nil, false
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode = kerr.PolicyViolation.Code
		rt.ErrorMessage = kmsg.StringPtr(excessiveBatch)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, true
}

// partitionCount returns how many partitions kfake's topic has, up to
// count: partitions are numbered from 0 with no gap, so the count is the
// first partition kfake has no leader for, found by bisection (at most 31
// look-ups, each a LeaderFor, which a control function may call: kfake's
// loop serves admin calls while it waits for one).
func (c *Cluster) partitionCount(topic string, count int32) int32 {
	lo, hi := int32(0), count // partition lo-1 exists (or lo is 0); hi is the bound
	for lo < hi {
		mid := lo + (hi-lo)/2
		if c.kf.LeaderFor(topic, mid) >= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// installLimits caps what one CreateTopics or CreatePartitions request may
// make, as Kafka's controller does, before kfake makes it.
func (c *Cluster) installLimits(defaultParts int) {
	c.keepControl(kmsg.CreateTopics, func(req kmsg.Request) (kmsg.Response, error, bool) {
		ct, ok := req.(*kmsg.CreateTopicsRequest)
		if !ok {
			return nil, nil, false
		}
		resp, refused := createTopicsLimit(ct, defaultParts)
		if refused {
			c.log.Warn("refused CreateTopics: more than a Kafka controller makes in one operation", "records_max", maxRecordsPerUserOp, "topics", len(ct.Topics))
		}
		return resp, nil, refused
	})
	c.keepControl(kmsg.CreatePartitions, func(req kmsg.Request) (kmsg.Response, error, bool) {
		cp, ok := req.(*kmsg.CreatePartitionsRequest)
		if !ok {
			return nil, nil, false
		}
		resp, refused := createPartitionsLimit(cp, c.partitionCount)
		if refused {
			c.log.Warn("refused CreatePartitions: more than a Kafka controller makes in one operation", "records_max", maxRecordsPerUserOp, "topics", len(cp.Topics))
		}
		return resp, nil, refused
	})
}
