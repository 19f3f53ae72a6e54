package broker

// Issue 30: the broker under a resource limit, driven to it. Each broker runs
// in a child process under prlimit (child_test.go).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdiag/kdiag/netstat"
)

// TestAcceptSurvivesFileDescriptorExhaustion: with 256 open files allowed,
// 300 idle connections run the broker out of file descriptors. It must warn
// once, say what to do, and serve again once they close; kfake's accept loop
// stopped for good, and the port refused every connection after.
func TestAcceptSurvivesFileDescriptorExhaustion(t *testing.T) {
	cb := startChild(t, "--nofile=256", Config{Brokers: 1})
	const conns = 300
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range conns {
		c, err := net.DialTimeout("tcp", cb.addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d of %d: %v (a broker out of files must keep its port open)", i+1, conns, err)
		}
		open = append(open, c)
	}
	// The broker has more connections than files: it says so.
	const warning = "accept failed: the broker has used the process's open-file limit, 256"
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(cb.stderr.String(), warning) && time.Now().Before(deadline) {
		cb.alive(t, "with 300 connections open")
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(cb.stderr.String(), warning) {
		t.Errorf("no warning %q within 30s of %d connections to a broker allowed 256 files", warning, conns)
	}
	for _, c := range open {
		c.Close()
	}
	open = nil

	// Once they close, the broker serves a new client.
	conn, err := net.DialTimeout("tcp", cb.addr, 10*time.Second)
	if err != nil {
		t.Fatalf("after the connections closed, the broker's port refuses: %v\nbroker log:\n%s", err, tail(cb.stderr.String(), 2000))
	}
	defer conn.Close()
	apiVersions(t, conn, 1)
	cb.alive(t, "after the connections closed")
	// An accept that succeeds at once ends the episode, and says so: the
	// next one, unless the broker was still closing the 300 then.
	const again = "accepting connections again"
	for i := 0; i < 20 && !strings.Contains(cb.stderr.String(), again); i++ {
		c := dialBroker(t, cb.addr)
		apiVersions(t, c, int32(i+2))
		c.Close()
	}
	// The broker writes the line before it answers; its stderr reaches
	// this process through a pipe.
	waitFor(t, 10*time.Second, "the broker's log says "+again, func() bool { return strings.Contains(cb.stderr.String(), again) })

	log := cb.stderr.String()
	if n := strings.Count(log, "accept failed"); n != 1 {
		t.Errorf("the accept failure is logged %d times, want once for the episode", n)
	}
	for _, want := range []string{"level=WARN", "raise the limit (ulimit -n)", "too many open files"} {
		if !strings.Contains(log, want) {
			t.Errorf("broker log lacks %q", want)
		}
	}
}

// produceFrame returns a Produce v9 request (key 0) of size bytes, size
// prefix excluded, to a topic the broker does not have: kfake reads it whole
// and answers UNKNOWN_TOPIC_OR_PARTITION, keeping none of it.
func produceFrame(t testing.TB, size int) []byte {
	t.Helper()
	return produceFrameAcks(t, size, 1)
}

// produceFrameAcks is produceFrame with the request's acks: with 0 the
// broker answers nothing.
func produceFrameAcks(t testing.TB, size int, acks int16) []byte {
	t.Helper()
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, acks, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	rp := kmsg.NewProduceRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	// The records' length is a varint: fit the records until the frame
	// is size bytes.
	n := size
	for range 4 {
		r.Topics[0].Partitions[0].Records = make([]byte, n)
		f := request(r)
		if got := len(f) - 4; got == size {
			return f
		} else {
			n -= got - size
		}
	}
	t.Fatalf("no produce frame of %d bytes", size)
	return nil
}

// waitingLine is what the broker logs when a reader first waits for room.
const waitingLine = "request bytes held reached the bound"

// readProduceResponse reads a Produce v9 response from conn: it must be
// UNKNOWN_TOPIC_OR_PARTITION.
func readProduceResponse(conn net.Conn) error {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if len(body) < 5 {
		return fmt.Errorf("response of %d bytes", len(body))
	}
	if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, then the flexible header's empty tags
		return fmt.Errorf("parse the response: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("response %+v, want one partition", resp)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		return fmt.Errorf("error code %d, want UNKNOWN_TOPIC_OR_PARTITION (%d)", code, kerr.UnknownTopicOrPartition.Code)
	}
	return nil
}

// writePieces writes b to conn in 64 KiB pieces, as a client trickles a
// large request.
func writePieces(conn net.Conn, b []byte) error {
	for off := 0; off < len(b); off += 64 << 10 {
		if _, err := conn.Write(b[off:min(off+64<<10, len(b))]); err != nil {
			return fmt.Errorf("write at %d of %d: %w", off, len(b), err)
		}
	}
	return nil
}

// allRead says whether every byte sent to the broker on port has been read
// by it: no socket of port's connections holds unread bytes (Recv-Q of the
// broker's side) or bytes on their way (Send-Q of the client's), as
// /proc/net/tcp shows them.
func allRead(t testing.TB, port uint16) bool {
	t.Helper()
	socks, err := netstat.ReadProcNetTCP("/proc", 0, netstat.States(netstat.Established))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range socks {
		if (s.Local.Port() == port && s.RecvQ > 0) || (s.Remote.Port() == port && s.SendQ > 0) {
			return false
		}
	}
	return true
}

// sendTogether sends frame on n connections so that every frame is in the
// broker at once: each connection writes all of its frame but the last byte,
// and only when the broker has read all of them (or says it holds all it
// may: it has logged one more waiting line; or it has exited) does any
// write its last byte and read the response. A broker that buffers without
// bound so holds n frames at once; a bounded one holds what its bound
// allows, which stops it reading, and reads the rest as it answers. It
// returns the connections' errors.
func sendTogether(t testing.TB, cb *childBroker, frame []byte, n int) []error {
	t.Helper()
	var (
		wg      sync.WaitGroup
		written atomic.Int32
		release = make(chan struct{})
		errs    = make([]error, n)
	)
	for i := range n {
		conn := dialBroker(t, cb.addr)
		_ = conn.SetDeadline(time.Now().Add(3 * time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := writePieces(conn, frame[:len(frame)-1])
			written.Add(1)
			if err == nil {
				<-release
				_, err = conn.Write(frame[len(frame)-1:])
			}
			if err == nil {
				err = readProduceResponse(conn)
			}
			if err != nil {
				errs[i] = fmt.Errorf("connection %d: %w", i, err)
			}
		}()
	}
	waited := strings.Count(cb.stderr.String(), waitingLine)
	held := func() bool { return strings.Count(cb.stderr.String(), waitingLine) > waited }
	port := uint16(netip.MustParseAddrPort(cb.addr).Port())
	deadline := time.Now().Add(3 * time.Minute)
	for !(int(written.Load()) == n && allRead(t, port)) && !held() && time.Now().Before(deadline) {
		select {
		case <-cb.exited:
			deadline = time.Now()
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(release)
	wg.Wait()
	return errs
}

// TestQueuedRequestBytesAreBounded: under a 512 MiB data limit, 200
// connections each send a 1 MiB frame, every one in the broker before any
// ends; then two send a 100 MiB frame at once, and two a frame of the bound's
// size. Unbounded, the broker buffered every frame at 2-2.5 times its size
// and died ("fatal error: runtime: out of memory"). Bounded by the default
// MaxQueuedRequestBytes, readers wait for room and every request is
// answered, but for the frames larger than the bound: those are refused,
// with a line that says which flag to raise.
func TestQueuedRequestBytesAreBounded(t *testing.T) {
	cb := startChild(t, fmt.Sprintf("--data=%d", 512<<20), Config{Brokers: 1})
	for _, err := range sendTogether(t, cb, produceFrame(t, 1<<20), 200) {
		if err != nil {
			cb.failed(t, "200 frames of 1 MiB", err)
		}
	}
	cb.alive(t, "after 200 frames of 1 MiB")
	if !strings.Contains(cb.stderr.String(), waitingLine) {
		t.Errorf("200 MiB of frames at once did not reach the bound: the log lacks %q", waitingLine)
	}

	// Larger than the bound: refused on the size prefix, before a byte of
	// the body is buffered.
	huge := produceFrame(t, DefaultMaxRequestBytes)
	for i := range 2 {
		conn := dialBroker(t, cb.addr)
		if _, err := conn.Write(huge[:64<<10]); err != nil {
			t.Fatalf("100 MiB frame %d: %v", i, err)
		}
		readUntilClosed(t, conn, "a 100 MiB frame")
	}
	refused := fmt.Sprintf("size %d larger than the broker's bound on queued request bytes %d (--max-queued-request-bytes", DefaultMaxRequestBytes, DefaultMaxQueuedRequestBytes)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(cb.stderr.String(), refused) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(cb.stderr.String(), refused); n != 2 {
		t.Errorf("the broker logged %d refusals of a 100 MiB frame, want 2 saying %q", n, refused)
	}

	// Two frames of the bound's size at once: one waits for the other.
	for _, err := range sendTogether(t, cb, produceFrame(t, DefaultMaxQueuedRequestBytes), 2) {
		if err != nil {
			cb.failed(t, "two frames of the bound's size", err)
		}
	}
	cb.alive(t, "after two frames of the bound's size")
	if rss, err := cb.peakRSS(); err == nil {
		t.Logf("broker's peak RSS: %.1f MiB", float64(rss)/(1<<20))
	}
}

// TestRetentionBoundsEachPartition: 256 MiB produced with franz-go to one
// partition of a broker that keeps 1 MiB a partition, under a data limit
// the whole log would not fit in. At c3c029d it kept every record (500 MB
// produced left 975 MB resident) and here died. The partition keeps its
// bound, its log start offset moves past what it dropped, a Fetch for a
// dropped offset gets OFFSET_OUT_OF_RANGE, and a consumer from the start
// reads what is kept.
func TestRetentionBoundsEachPartition(t *testing.T) {
	const (
		retention = 1 << 20
		value     = 16 << 10
		records   = 256 << 20 / value
		topic     = "retained"
	)
	cb := startChild(t, fmt.Sprintf("--data=%d", retentionTestDataLimit), Config{Brokers: 1, Partitions: 1, Topics: []string{topic}, RetentionBytes: retention})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Uncompressed, so that the bytes produced are the bytes the broker
	// stores; kgo compresses with snappy by default.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cb.addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	payload := make([]byte, value)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	produced := make(chan error, 1)
	go func() {
		for sent := 0; sent < records; sent += 1024 {
			batch := make([]*kgo.Record, 1024)
			for i := range batch {
				batch[i] = &kgo.Record{Value: payload}
			}
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				produced <- fmt.Errorf("produce after %d MiB: %w", sent*value>>20, err)
				return
			}
		}
		produced <- nil
	}()
	select {
	case err := <-produced:
		if err != nil {
			cb.failed(t, "producing 256 MiB", err)
		}
		cb.alive(t, "after 256 MiB produced")
	case <-cb.exited:
		cb.alive(t, "producing 256 MiB")
	}
	if rss, err := cb.peakRSS(); err == nil {
		t.Logf("broker's peak RSS after 256 MiB produced: %.1f MiB", float64(rss)/(1<<20))
	}

	start, end := listOffset(ctx, t, cl, topic, -2), listOffset(ctx, t, cl, topic, -1)
	if end != records {
		t.Fatalf("log end offset %d, want %d", end, records)
	}
	// At most the bound, a segment (an eighth of it) and a produce
	// request of up to 1 MB past it.
	kept := (end - start) * value
	if start == 0 || kept > retention+retention/8+1<<20 {
		t.Fatalf("the partition keeps offsets %d-%d (%d bytes of values), want at most %d bytes and a log start past 0", start, end, kept, retention+retention/8+1<<20)
	}

	// A consumer at a dropped offset is told so, as by Kafka.
	if code := fetchError(ctx, t, cl, topic, 0); code != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at offset 0 after retention: error code %d, want OFFSET_OUT_OF_RANGE (%d)", code, kerr.OffsetOutOfRange.Code)
	}
	// One from the start reads what is kept.
	cons, err := kgo.NewClient(kgo.SeedBrokers(cb.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var first, n int64 = -1, 0
	for n < end-start && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first = r.Offset
			}
			n++
		})
	}
	if first != start || n != end-start {
		t.Errorf("consumed %d records from offset %d, want the %d kept from %d", n, first, end-start, start)
	}
}

// retentionTestDataLimit is the address space the retention test's broker
// gets: what the bounded broker needs with room to spare, and far less than
// 256 MiB of records kept in kfake's segment files (which grow by doubling).
const retentionTestDataLimit = 256 << 20

// listOffset asks the broker (ListOffsets, key 2) for the partition's log
// start (-2) or end (-1) offset.
func listOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, which int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = which
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets %d: error code %d", which, p.ErrorCode)
	}
	return p.Offset
}

// fetchError fetches the partition at offset (Fetch, key 1, at the version
// kgo and the broker agree on, which names the topic by ID from v13) and
// returns the partition's error code.
func fetchError(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, offset int64) int16 {
	t.Helper()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata for %s: %v", topic, err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}
