package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes
// (SocketServerConfigs.SOCKET_REQUEST_MAX_BYTES_DEFAULT, 100 MiB): the
// largest request frame a broker reads.
const DefaultMaxRequestBytes = 100 * 1024 * 1024

// The errors a refused request frame wraps; the broker logs the whole
// message and closes the connection, as Kafka's SocketServer does.
var (
	// ErrRequestTooLarge: the frame's size prefix is negative or over
	// socket.request.max.bytes (Kafka's InvalidReceiveException).
	ErrRequestTooLarge = errors.New("invalid receive")
	// ErrUnknownAPIKey: the header names an API key the broker does not
	// serve (Kafka's InvalidRequestException "Unknown API key").
	ErrUnknownAPIKey = errors.New("unknown API key")
	// ErrUnsupportedVersion: the header names a version of a known API
	// key that the broker does not serve (Kafka's InvalidRequestException
	// "... which is not enabled").
	ErrUnsupportedVersion = errors.New("unsupported API version")
	// ErrMalformedRequest: the header or the body does not parse at the
	// version the header names.
	ErrMalformedRequest = errors.New("malformed request")
)

// apiKeyApiVersions is the ApiVersions key (18): Kafka accepts it at every
// version, answering one it does not serve with a v0 UNSUPPORTED_VERSION
// response (ApiKeys.isVersionEnabled, KIP-511).
const apiKeyApiVersions = 18

// minHeaderSize is the smallest request header (RequestHeader v1: api key,
// api version, correlation id, a null client id): 2+2+4+2 bytes. Kafka's
// header v0 (ControlledShutdown v0 only) is shorter, but no broker here
// serves ControlledShutdown.
const minHeaderSize = 10

// versionRange is the versions of one API key a broker serves (one entry
// of an ApiVersions response, key 18).
type versionRange struct{ min, max int16 }

// versionTable is the versions a broker serves, by API key.
type versionTable map[int16]versionRange

// requestHeader is a parsed Kafka request header (RequestHeader.json v1 and
// v2: api key, api version, correlation id, nullable client id, and in v2,
// the flexible versions, tagged fields).
type requestHeader struct {
	Key, Version int16
	Correlation  int32
	ClientID     *string
	// Size is the header's length in bytes: the body starts there.
	Size int
	// NoResponse: the broker sends nothing back (Produce with acks=0).
	NoResponse bool
}

func (h requestHeader) String() string {
	return fmt.Sprintf("%s (key %d) v%d", kmsg.NameForKey(h.Key), h.Key, h.Version)
}

// checkSize checks a frame's 4-byte size prefix as Kafka's NetworkReceive
// does: negative or over max is refused before any body byte is read.
func checkSize(size int32, max int32) error {
	switch {
	case size < 0:
		return fmt.Errorf("%w: size %d is negative", ErrRequestTooLarge, size)
	case size > max:
		return fmt.Errorf("%w: size %d larger than socket.request.max.bytes %d", ErrRequestTooLarge, size, max)
	case size < minHeaderSize:
		return fmt.Errorf("%w: size %d is shorter than a request header (%d bytes)", ErrMalformedRequest, size, minHeaderSize)
	}
	return nil
}

// checkKeyVersion checks the api key and version that open a request body
// against what the broker serves, as Kafka's SocketServer.parseRequestHeader
// does (ApiVersionManager.isApiEnabled).
func checkKeyVersion(key, version int16, vs versionTable) error {
	r, ok := vs[key]
	switch {
	case !ok:
		return fmt.Errorf("%w %d (%s)", ErrUnknownAPIKey, key, kmsg.NameForKey(key))
	case key == apiKeyApiVersions && version >= 0:
		return nil
	case version < r.min || version > r.max:
		return fmt.Errorf("%w: %s (key %d) v%d, the broker serves v%d-v%d", ErrUnsupportedVersion, kmsg.NameForKey(key), key, version, r.min, r.max)
	}
	return nil
}

// parseRequest checks one request frame body (the bytes after the size
// prefix): a known api key at a version the broker serves, a header that
// parses, and a body that parses at that version with franz-go's kmsg, the
// same decoder kfake uses. It is pure: the fuzz target drives it.
func parseRequest(body []byte, vs versionTable) (requestHeader, error) {
	var h requestHeader
	if len(body) < minHeaderSize {
		return h, fmt.Errorf("%w: %d bytes is shorter than a request header (%d bytes)", ErrMalformedRequest, len(body), minHeaderSize)
	}
	r := kbin.Reader{Src: body}
	h.Key, h.Version, h.Correlation = r.Int16(), r.Int16(), r.Int32()
	if err := checkKeyVersion(h.Key, h.Version, vs); err != nil {
		return h, err
	}
	h.ClientID = r.UnsafeNullableString()
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		// vs names a key kmsg does not know: kfake could not decode it
		// either (client_conn.go calls SetVersion on this nil).
		return h, fmt.Errorf("%w %d (not in franz-go's kmsg)", ErrUnknownAPIKey, h.Key)
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return h, fmt.Errorf("%w: %s header: %v", ErrMalformedRequest, h, decodeError(err))
	}
	h.Size = len(body) - len(r.Src)
	if h.Key == apiKeyApiVersions && h.Version > vs[h.Key].max {
		// Kafka does not parse an ApiVersions body of a version it does
		// not serve (RequestContext.parseRequest): readFrame replaces it.
		return h, nil
	}
	if err := req.(kmsg.UnsafeReadFrom).UnsafeReadFrom(r.Src); err != nil {
		return h, fmt.Errorf("%w: %s body: %v", ErrMalformedRequest, h, decodeError(err))
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		h.NoResponse = true
	}
	return h, nil
}

// decodeError words kbin's ErrNotEnoughData, whose text speaks of a
// response, for a request. kmsg decodes with its own internal copy of kbin,
// whose error is another value with the same text: hence the text compare.
func decodeError(err error) string {
	if errors.Is(err, kbin.ErrNotEnoughData) || err.Error() == kbin.ErrNotEnoughData.Error() {
		return "not enough data (a length or count runs past the end of the frame)"
	}
	return err.Error()
}

// frameReader reads request frames from a client connection and hands on
// only those parseRequest accepts. It buffers a frame whole before handing
// it on, growing the buffer as bytes arrive rather than by the size prefix,
// so a client that announces 100 MiB and sends 10 bytes costs 10 bytes, not
// 100 MiB (kfake allocates the announced size at once).
type frameReader struct {
	r        io.Reader
	max      int32
	versions versionTable
	// room, when set, bounds what the reader buffers: it is told of each
	// accepted frame and asked for room before the buffer grows.
	room frameRoom
	// chunk is the first buffer size (4 KiB unless set), doubled as bytes
	// arrive; tests lower it.
	chunk int
}

// frameRoom is what frameReader asks for room before it buffers a frame's
// bytes: the connection's share of the cluster's requestBudget.
type frameRoom interface {
	// admit is told a frame's size (its size prefix's value) once its
	// size, API key and version are accepted; an error refuses the frame.
	admit(size int) error
	// grow waits until the frame being read may buffer n bytes, its
	// size prefix included.
	grow(n int) error
}

// truncatedError is a frame cut short by the client's close: not a refusal,
// but worth a line in the log.
type truncatedError struct {
	got, want int
}

func (e *truncatedError) Error() string {
	return fmt.Sprintf("closed mid-request: %d of %d bytes", e.got, e.want)
}

func (e *truncatedError) Unwrap() error { return io.ErrUnexpectedEOF }

// next reads one frame and returns it with its size prefix, ready for kfake.
// It returns io.EOF when the client closed between frames, a
// *truncatedError when it closed inside one, the read's error when the
// connection failed, and an error wrapping one of the Err* values when the
// frame is refused: the caller then closes the connection. With room set it
// waits for room before it buffers each part of a frame.
func (f *frameReader) next() ([]byte, requestHeader, error) {
	var prefix [8]byte // the size, then api key and version
	if n, err := io.ReadFull(f.r, prefix[:4]); err != nil {
		if n > 0 && errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, requestHeader{}, &truncatedError{got: n, want: 4}
		}
		return nil, requestHeader{}, err
	}
	size := int32(binary.BigEndian.Uint32(prefix[:4]))
	if err := checkSize(size, f.max); err != nil {
		return nil, requestHeader{}, err
	}
	total := 4 + int(size)
	// Refuse an unknown key or version before buffering the body.
	if n, err := io.ReadFull(f.r, prefix[4:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, requestHeader{}, &truncatedError{got: 4 + n, want: total}
		}
		return nil, requestHeader{}, err
	}
	key, version := int16(binary.BigEndian.Uint16(prefix[4:6])), int16(binary.BigEndian.Uint16(prefix[6:8]))
	if err := checkKeyVersion(key, version, f.versions); err != nil {
		return nil, requestHeader{Key: key, Version: version}, err
	}

	if f.room != nil {
		if err := f.room.admit(int(size)); err != nil {
			return nil, requestHeader{Key: key, Version: version}, err
		}
	}
	grow := func(n int) error {
		if f.room == nil {
			return nil
		}
		return f.room.grow(n)
	}

	chunk := f.chunk
	if chunk <= 0 {
		chunk = 4 << 10
	}
	if err := grow(min(total, chunk)); err != nil {
		return nil, requestHeader{Key: key, Version: version}, err
	}
	buf := make([]byte, 8, min(total, chunk))
	copy(buf, prefix[:])
	for len(buf) < total {
		if len(buf) == cap(buf) {
			// Double what arrived so far, never past the frame.
			n := min(total, 2*cap(buf))
			if err := grow(n); err != nil {
				return nil, requestHeader{Key: key, Version: version}, err
			}
			grown := make([]byte, len(buf), n)
			copy(grown, buf)
			buf = grown
		}
		n, err := f.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < total {
			if errors.Is(err, io.EOF) {
				return nil, requestHeader{Key: key, Version: version}, &truncatedError{got: len(buf), want: total}
			}
			return nil, requestHeader{Key: key, Version: version}, err
		}
	}
	h, err := parseRequest(buf[4:], f.versions)
	if err != nil {
		return nil, h, err
	}
	if h.Key == apiKeyApiVersions && h.Version > f.versions[h.Key].max {
		buf = unsupportedApiVersions(buf[:4+h.Size], h.Version)
	}
	return buf, h, nil
}

// unsupportedApiVersions replaces the body of an ApiVersions request of a
// version the broker does not serve with one that decodes at that version,
// keeping the header: kfake then answers it as Kafka does, with a v0
// UNSUPPORTED_VERSION response naming the versions it serves, whatever the
// client's body held (Kafka never parses it).
func unsupportedApiVersions(head []byte, version int16) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	// v3+ bodies carry the client software name and version; kfake
	// answers an unsupported version before it validates them.
	req.ClientSoftwareName, req.ClientSoftwareVersion = "unknown", "unknown"
	out := req.AppendTo(append([]byte(nil), head...))
	binary.BigEndian.PutUint32(out[:4], uint32(len(out)-4))
	return out
}
