package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds a response size we accept, so that a peer that is not a
// Kafka broker cannot make us allocate gigabytes.
const maxFrame = 256 << 20

// crc32c is the Castagnoli table RecordBatch v2 checksums with (KIP-98).
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// readFrame reads one response: the 4-byte big-endian size, then that many
// bytes (correlation ID, header tags if flexible, body).
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxFrame {
		return nil, fmt.Errorf("invalid response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// parseResponse checks the correlation ID of a frame, skips the response
// header's tagged fields when the header is flexible (ResponseHeader v1; the
// ApiVersions response always uses header v0 so that any client can read it,
// KIP-511) and decodes the body into the request's response type.
func parseResponse(frame []byte, corrID int32, req kmsg.Request) (kmsg.Response, error) {
	if got := int32(binary.BigEndian.Uint32(frame)); got != corrID {
		return nil, fmt.Errorf("correlation ID mismatch: got %d, want %d", got, corrID)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	if req.Key() == 18 && len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == 35 {
		// UNSUPPORTED_VERSION: the broker answers in ApiVersionsResponse v0,
		// whatever version was asked, listing the versions it supports.
		resp = &kmsg.ApiVersionsResponse{Version: 0}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// skipTags skips a tagged-field section: a uvarint count, then per field a
// uvarint tag, a uvarint size and the bytes.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tagged fields in response header")
	}
	b = b[l:]
	for ; n > 0; n-- {
		_, l := binary.Uvarint(b)
		if l <= 0 {
			return nil, errors.New("bad tagged fields in response header")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tagged fields in response header")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// batchRecord is what one record contributes to a batch.
type batchRecord struct {
	key, value []byte
	headers    []kmsg.Header
	timestamp  int64 // Unix milliseconds
}

// encodeRecord appends one record of a RecordBatch v2 (the "Record" of the
// Kafka protocol's message format: varint length, attributes, varlong
// timestamp delta, varint offset delta, key, value, headers).
func encodeRecord(dst []byte, r batchRecord, offsetDelta int32, firstTS int64) []byte {
	rec := kmsg.Record{
		TimestampDelta64: r.timestamp - firstTS,
		OffsetDelta:      offsetDelta,
		Key:              r.key,
		Value:            r.value,
		Headers:          r.headers,
	}
	// Record.AppendTo writes Length first as a varint; encode with 0 (one
	// byte) to learn the length of the rest, then write the real prefix.
	body := rec.AppendTo(nil)[1:]
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// recordSize is the encoded size of a record in a batch, for batch.size and
// max.request.size accounting.
func recordSize(r batchRecord) int {
	return len(encodeRecord(nil, r, 0, r.timestamp)) + 8 // offset and timestamp deltas grow a little in a batch
}

// producerState is what a batch carries of an idempotent producer: its ID,
// epoch and the batch's first sequence; -1 each without idempotence.
type producerState struct {
	id    int64
	epoch int16
	seq   int32
}

// encodeBatch returns a RecordBatch v2 (magic 2, KIP-98) holding recs,
// with the producer's ID, epoch and base sequence (-1 each when not
// idempotent), compressed with c if c is not nil and it helps.
func encodeBatch(recs []batchRecord, c kgo.Compressor, produceVersion int16, ps producerState) []byte {
	firstTS, maxTS := recs[0].timestamp, recs[0].timestamp
	var records []byte
	for i, r := range recs {
		if r.timestamp > maxTS {
			maxTS = r.timestamp
		}
		records = encodeRecord(records, r, int32(i), firstTS)
	}
	var attrs int16 // bits 0-2 codec, bit 3 timestamp type (0: CreateTime)
	if c != nil {
		var flags []kgo.CompressFlag
		if produceVersion < 7 {
			// zstd needs Produce v7 (Kafka 2.1, KIP-110); with the flag the
			// compressor declines and the batch goes uncompressed.
			flags = append(flags, kgo.CompressDisableZstd)
		}
		var buf bytes.Buffer
		if out, codec := c.Compress(&buf, records, flags...); out != nil && len(out) < len(records) {
			records = append([]byte(nil), out...)
			attrs = int16(codec)
		}
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       firstTS,
		MaxTimestamp:         maxTS,
		ProducerID:           ps.id,
		ProducerEpoch:        ps.epoch,
		FirstSequence:        ps.seq,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	out := b.AppendTo(nil)
	// Length counts what follows it: everything after FirstOffset (8) and
	// Length itself (4).
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	// The CRC-32C covers attributes to the end: after FirstOffset (8),
	// Length (4), PartitionLeaderEpoch (4), Magic (1) and CRC (4).
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], crc32c))
	return out
}

// compressor returns the codec for compression.type, nil for none.
func compressor(name string) (kgo.Compressor, error) {
	var codec kgo.CompressionCodec
	switch name {
	case "", "none":
		return nil, nil
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("compression.type: %q is not a compression type (want none, gzip, snappy, lz4 or zstd)", name)
	}
	return kgo.DefaultCompressor(codec)
}

// splitHostPort splits host:port ([v6]:port too).
func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("not host:port")
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("invalid port (want host:port)")
	}
	return host, port, nil
}
