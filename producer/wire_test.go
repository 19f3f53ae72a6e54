package producer

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMurmur2 uses the vectors of the Java client's UtilsTest.testMurmur2
// and cross-checks kgo's Java-compatible partitioner.
func TestMurmur2(t *testing.T) {
	vectors := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for k, want := range vectors {
		if got := murmur2([]byte(k)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", k, got, want)
		}
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := 0; i < 200; i++ {
		key := bytes.Repeat([]byte{byte(i)}, i%9)
		if got, want := keyPartition(key, 7), int32(part.Partition(&kgo.Record{Key: key}, 7)); got != want {
			t.Errorf("key %x: partition %d, kgo says %d", key, got, want)
		}
	}
}

func TestSticky(t *testing.T) {
	var s sticky
	first := s.next([]int32{0, 1, 2}, 10, 25)
	for i := 0; i < 2; i++ {
		if s.next([]int32{0, 1, 2}, 10, 25) != first {
			t.Fatal("sticky partition changed before batch.size bytes")
		}
	}
	// 30 bytes went to first: the next record switches to another one.
	if p := s.next([]int32{0, 1, 2}, 10, 25); p == first {
		t.Errorf("did not switch after batch.size bytes")
	}
	// A partition that lost its leader is left at once.
	s = sticky{}
	p := s.next([]int32{0, 1}, 1, 1000)
	other := 1 - p
	if got := s.next([]int32{other}, 1, 1000); got != other {
		t.Errorf("stuck on unavailable partition %d", got)
	}
}

// TestEncodeBatch decodes a batch with kmsg and checks the v2 fields, the
// length and the CRC-32C over attributes..end.
func TestEncodeBatch(t *testing.T) {
	recs := []batchRecord{
		{key: []byte("k"), value: []byte("v1"), timestamp: 1000, headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{key: nil, value: []byte("v2"), timestamp: 1005},
		{key: []byte{}, value: nil, timestamp: 1003},
	}
	raw := encodeBatch(recs, nil, 9, producerState{-1, -1, -1})
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if int(b.Length) != len(raw)-12 || b.Magic != 2 || b.NumRecords != 3 || b.LastOffsetDelta != 2 ||
		b.FirstTimestamp != 1000 || b.MaxTimestamp != 1005 || b.ProducerID != -1 || b.FirstSequence != -1 || b.Attributes != 0 {
		t.Errorf("batch header: %+v", b)
	}
	if want := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); b.CRC != want {
		t.Errorf("CRC %x, want %x", b.CRC, want)
	}
	var got []kmsg.Record
	rest := b.Records
	for len(rest) > 0 {
		l, n := binary.Varint(rest)
		var r kmsg.Record
		if err := r.ReadFrom(rest[:n+int(l)]); err != nil {
			t.Fatal(err)
		}
		r.Length = 0
		got = append(got, r)
		rest = rest[n+int(l):]
	}
	want := []kmsg.Record{
		{Key: []byte("k"), Value: []byte("v1"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{OffsetDelta: 1, TimestampDelta: 5, TimestampDelta64: 5, Key: nil, Value: []byte("v2")},
		{OffsetDelta: 2, TimestampDelta: 3, TimestampDelta64: 3, Key: []byte{}, Value: nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestEncodeBatchCompressed(t *testing.T) {
	c, err := compressor("gzip")
	if err != nil {
		t.Fatal(err)
	}
	recs := []batchRecord{{value: bytes.Repeat([]byte("compress me "), 100), timestamp: 1}}
	raw := encodeBatch(recs, c, 9, producerState{-1, -1, -1})
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if b.Attributes&7 != 1 || len(b.Records) >= 1200 {
		t.Errorf("attributes %d, %d record bytes: not gzip-compressed", b.Attributes, len(b.Records))
	}
	if want := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); b.CRC != want {
		t.Errorf("CRC %x, want %x", b.CRC, want)
	}
}

func TestParseResponse(t *testing.T) {
	// A flexible METADATA v12 response: correlation ID, header tags, body.
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 7, Host: "h", Port: 1}}
	frame := binary.BigEndian.AppendUint32(nil, 42)
	frame = append(frame, 0) // no header tags
	frame = resp.AppendTo(frame)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	got, err := parseResponse(frame, 42, req)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.(*kmsg.MetadataResponse).Brokers; len(b) != 1 || b[0].NodeID != 7 {
		t.Errorf("brokers %+v", b)
	}
	if _, err := parseResponse(frame, 41, req); err == nil {
		t.Error("correlation ID mismatch accepted")
	}
	// ApiVersions answers UNSUPPORTED_VERSION in v0 whatever was asked.
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version = 0
	av.ErrorCode = 35
	av.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 2}}
	frame = av.AppendTo(binary.BigEndian.AppendUint32(nil, 1))
	avReq := kmsg.NewPtrApiVersionsRequest()
	avReq.Version = 4
	got, err = parseResponse(frame, 1, avReq)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.(*kmsg.ApiVersionsResponse); r.ErrorCode != 35 || len(r.ApiKeys) != 1 || r.ApiKeys[0].MaxVersion != 2 {
		t.Errorf("fallback response %+v", r)
	}
}

func TestReadFrame(t *testing.T) {
	var buf bytes.Buffer
	buf.Write([]byte{0, 0, 0, 6, 0, 0, 0, 1, 'h', 'i'})
	f, err := readFrame(&buf)
	if err != nil || !bytes.Equal(f, []byte{0, 0, 0, 1, 'h', 'i'}) {
		t.Errorf("frame %q err %v", f, err)
	}
	for name, in := range map[string][]byte{"short body": {0, 0, 0, 9, 1}, "huge": {0x7f, 0, 0, 0}, "tiny": {0, 0, 0, 1, 0}} {
		if _, err := readFrame(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzParseResponse feeds arbitrary broker bytes to the response parser: it
// must return an error, never panic.
func FuzzParseResponse(f *testing.F) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{BaseOffset: 3}}}}
	f.Add(append([]byte{0, 0, 0, 5, 0}, resp.AppendTo(nil)...), int16(0), int16(9))
	f.Add([]byte{0, 0, 0, 5, 0, 35, 0, 0, 0, 0}, int16(18), int16(3))
	f.Fuzz(func(t *testing.T, frame []byte, key, version int16) {
		if len(frame) < 4 {
			return
		}
		var req kmsg.Request
		switch key % 3 {
		case 0:
			req = kmsg.NewPtrProduceRequest()
		case 1:
			req = kmsg.NewPtrMetadataRequest()
		default:
			req = kmsg.NewPtrApiVersionsRequest()
		}
		if version < 0 {
			version = -version
		}
		req.SetVersion(version % (req.MaxVersion() + 1))
		parseResponse(frame, 5, req)
	})
}
