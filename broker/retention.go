package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultRetentionBytes is the default bound on each partition's log: a
// broker that runs for days under a test or a repro keeps the last 64 MiB
// of every partition, not every record produced (Kafka's log.retention.bytes
// is unbounded by default, but a Kafka broker keeps its log on disk, where
// kfake keeps it in memory).
const DefaultRetentionBytes = 64 << 20

// segmentBytes is the log.segment.bytes that goes with a retention bound.
// kfake keeps each partition's log in in-memory segment files and, as Kafka,
// frees memory a whole segment at a time, once every batch of it is below the
// log start offset; its default 100 MiB segments would keep up to 100 MiB
// past any bound. An eighth of the bound (64 KiB at least, kfake's 100 MiB
// at most) keeps a partition within about 1.25 times its bound, in a handful
// of segments.
func segmentBytes(retention int64) int64 {
	return min(max(retention/8, 64<<10), 100<<20)
}

// retentionConfigs are the broker configs that bound each partition's log to
// retention bytes: kfake drops the oldest batches past log.retention.bytes
// and moves the log start offset past them (data.go, applyRetention), as
// Kafka's retention does, so a Fetch or ListOffsets for a dropped offset is
// answered as a Kafka broker answers it. log.retention.ms is -1 because this
// broker never expired records by age (kfake applies retention only on its
// log cleaner's hourly tick, which runs only for topics with their own
// retention configs) and because kfake's check by age reads every batch of
// the partition, on every run: the bound is by bytes. They are dynamic
// broker configs, so DescribeConfigs shows them and IncrementalAlterConfigs
// changes them, as on a Kafka broker.
func retentionConfigs(retention int64) map[string]string {
	return map[string]string{
		"log.retention.bytes": strconv.FormatInt(retention, 10),
		"log.segment.bytes":   strconv.FormatInt(segmentBytes(retention), 10),
		"log.retention.ms":    "-1",
	}
}

// installRetention makes kfake apply its retention as records arrive. kfake
// has the retention (Cluster.ApplyRetention) but runs it by itself only on a
// ticker (log.cleaner.backoff.ms, an hour) that starts only when a topic
// sets retention.ms or retention.bytes of its own, which an auto-created
// topic never does: without this, log.retention.bytes would never be
// applied. A Produce control function, the hook kfake gives before it
// appends, runs it once another segment's worth of record bytes has arrived
// since the last run, so a partition holds at most its bound, one segment
// and the request being appended. Control functions run one at a time in
// kfake's loop, which serves the admin call ApplyRetention makes while it
// waits for the function.
func (c *Cluster) installRetention(retention int64) {
	every := segmentBytes(retention)
	c.keepControl(kmsg.Produce, func(req kmsg.Request) (kmsg.Response, error, bool) {
		p, ok := req.(*kmsg.ProduceRequest)
		if !ok {
			return nil, nil, false
		}
		n := produceBytes(p)
		if before := c.sinceRetention.Add(n) - n; before >= every {
			// What arrived before this request is past the mark:
			// drop what the bound no longer holds before appending.
			c.kf.ApplyRetention()
			c.sinceRetention.Store(n)
		}
		return nil, nil, false
	})
}

// produceBytes returns the record batch bytes a Produce request (key 0)
// carries, over every topic and partition.
func produceBytes(p *kmsg.ProduceRequest) int64 {
	var n int64
	for _, t := range p.Topics {
		for _, part := range t.Partitions {
			n += int64(len(part.Records))
		}
	}
	return n
}
