package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testVersions is kfake's table, as Start checks frames against it.
func testVersions(t testing.TB) versionTable {
	t.Helper()
	vs, err := kfakeVersions()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// rawFrame builds a request frame by hand: size, api key, version,
// correlation id, nullable client id, then body as given (a flexible
// version's header tags are the caller's to put in body).
func rawFrame(key, version int16, body []byte) []byte {
	b := kbin.AppendInt32(nil, 0)
	b = kbin.AppendInt16(b, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, 1)
	b = kbin.AppendNullableString(b, nil)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// request encodes r at its version as a client sends it.
func request(r kmsg.Request) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("frame-test")).AppendRequest(nil, r, 1)
}

func metadataRequest(version int16, topics ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = version
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// issue16UnknownKey is the frame of issue 16 that killed kfake:
// struct.pack(">Ihhih", 10, 12345, 0, 1, -1).
var issue16UnknownKey = []byte{0, 0, 0, 10, 0x30, 0x39, 0, 0, 0, 0, 0, 1, 0xff, 0xff}

// issue16Huge is the size prefix of issue 16 that made kfake allocate 2 GiB.
var issue16Huge = []byte{0x7f, 0xff, 0xff, 0xff}

func TestKfakeVersionsAreKfakes(t *testing.T) {
	vs := testVersions(t)
	// From the regKey calls in kfake's 00_produce.go, 01_fetch.go,
	// 03_metadata.go, 18_api_versions.go and 17_sasl_handshake.go at the
	// pinned commit: if the pin moves and these change, check what the
	// broker now accepts.
	want := map[int16]versionRange{0: {3, 13}, 1: {4, 18}, 3: {0, 13}, 17: {1, 1}, 18: {0, 5}}
	for k, w := range want {
		if got := vs[k]; got != w {
			t.Errorf("key %d (%s): kfake serves %v, want %v", k, kmsg.NameForKey(k), got, w)
		}
	}
	if _, ok := vs[12345]; ok {
		t.Error("kfake serves key 12345")
	}
	if len(vs) < 40 {
		t.Errorf("kfake lists %d keys, want its ~60", len(vs))
	}
}

func TestFrameReader(t *testing.T) {
	vs := testVersions(t)
	meta := request(metadataRequest(1, "a"))
	tests := []struct {
		name    string
		in      []byte
		max     int32
		frames  int   // accepted before the error
		wantErr error // errors.Is; nil means io.EOF after the frames
	}{
		{name: "two requests", in: append(append([]byte(nil), meta...), meta...), frames: 2},
		{name: "issue 16: unknown api key 12345", in: issue16UnknownKey, wantErr: ErrUnknownAPIKey},
		{name: "issue 16: size 0x7fffffff", in: issue16Huge, wantErr: ErrRequestTooLarge},
		{name: "negative size", in: []byte{0xff, 0xff, 0xff, 0xff}, wantErr: ErrRequestTooLarge},
		{name: "size just over max", in: append(kbin.AppendInt32(nil, 1025), make([]byte, 1025)...), max: 1024, wantErr: ErrRequestTooLarge},
		{name: "size at max", in: rawFrame(18, 0, make([]byte, 1024-10)), max: 1024, frames: 1},
		{name: "size shorter than a header", in: []byte{0, 0, 0, 3, 0, 18, 0}, wantErr: ErrMalformedRequest},
		{name: "metadata v99", in: rawFrame(3, 99, nil), wantErr: ErrUnsupportedVersion},
		{name: "produce v0, below kfake's min", in: rawFrame(0, 0, nil), wantErr: ErrUnsupportedVersion},
		{name: "negative version", in: rawFrame(18, -1, nil), wantErr: ErrUnsupportedVersion},
		{name: "key kmsg knows, kfake does not serve (LeaderAndISR)", in: rawFrame(4, 0, nil), wantErr: ErrUnknownAPIKey},
		{name: "metadata v1 naming 5 topics and holding none", in: rawFrame(3, 1, []byte{0, 0, 0, 5}), wantErr: ErrMalformedRequest},
		{name: "client id longer than the frame", in: append(rawFrame(18, 0, nil)[:12], 0x7f, 0x00), wantErr: ErrMalformedRequest},
		{name: "flexible header without its tags", in: rawFrame(18, 3, nil), wantErr: ErrMalformedRequest},
		{name: "cut in the size", in: []byte{0, 0}, wantErr: io.ErrUnexpectedEOF},
		{name: "cut in the body", in: meta[:len(meta)-1], wantErr: io.ErrUnexpectedEOF},
		{name: "cut after the size", in: meta[:4], wantErr: io.ErrUnexpectedEOF},
		{name: "a good request, then an unknown key", in: append(append([]byte(nil), meta...), issue16UnknownKey...), frames: 1, wantErr: ErrUnknownAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = DefaultMaxRequestBytes
			}
			fr := &frameReader{r: bytes.NewReader(tt.in), max: max, versions: vs, chunk: 16}
			var got [][]byte
			var err error
			for {
				var f []byte
				if f, _, err = fr.next(); err != nil {
					break
				}
				got = append(got, f)
			}
			want := tt.wantErr
			if want == nil {
				want = io.EOF
			}
			if !errors.Is(err, want) {
				t.Fatalf("after %d frames: err = %v, want %v", len(got), err, want)
			}
			if len(got) != tt.frames {
				t.Fatalf("accepted %d frames, want %d", len(got), tt.frames)
			}
			// Accepted frames reach kfake byte for byte.
			var joined []byte
			for _, f := range got {
				joined = append(joined, f...)
			}
			if !bytes.Equal(tt.in[:len(joined)], joined) {
				t.Errorf("frames handed on differ from the input:\n got % x\nwant % x", joined, tt.in[:len(joined)])
			}
		})
	}
}

func TestFrameErrorsSayWhat(t *testing.T) {
	vs := testVersions(t)
	tests := []struct {
		in   []byte
		want string
	}{
		{issue16UnknownKey, "unknown API key 12345 (Unknown)"},
		{issue16Huge, "invalid receive: size 2147483647 larger than socket.request.max.bytes 104857600"},
		{rawFrame(3, 99, nil), "unsupported API version: Metadata (key 3) v99, the broker serves v0-v13"},
		{rawFrame(3, 1, []byte{0, 0, 0, 5}), "malformed request: Metadata (key 3) v1 body: not enough data (a length or count runs past the end of the frame)"},
	}
	for _, tt := range tests {
		fr := &frameReader{r: bytes.NewReader(tt.in), max: DefaultMaxRequestBytes, versions: vs}
		_, _, err := fr.next()
		if err == nil || err.Error() != tt.want {
			t.Errorf("% x: err = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestUnsupportedApiVersionsBodyIsReplaced(t *testing.T) {
	vs := testVersions(t)
	// v99, flexible header (empty tags), then a body no version decodes.
	in := rawFrame(18, 99, []byte{0, 0xff, 0xff, 0xff})
	fr := &frameReader{r: bytes.NewReader(in), max: DefaultMaxRequestBytes, versions: vs}
	f, h, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	if h.Key != 18 || h.Version != 99 {
		t.Fatalf("header %v, want ApiVersions v99", h)
	}
	if got := int(binary.BigEndian.Uint32(f)); got != len(f)-4 {
		t.Fatalf("size prefix %d for %d bytes", got, len(f)-4)
	}
	if !bytes.Equal(f[4:4+h.Size], in[4:4+h.Size]) {
		t.Errorf("header changed: % x, want % x", f[4:4+h.Size], in[4:4+h.Size])
	}
	// What kfake reads: the body decodes at v99.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	if err := req.ReadFrom(f[4+h.Size:]); err != nil {
		t.Fatalf("replaced body does not decode at v99: %v", err)
	}
}

// TestFrameBufferGrowsWithWhatArrives: a frame that announces 100 MiB and
// sends a few bytes costs those bytes, not the announced size.
func TestFrameBufferGrowsWithWhatArrives(t *testing.T) {
	vs := testVersions(t)
	in := rawFrame(0, 9, make([]byte, 1000))
	binary.BigEndian.PutUint32(in, DefaultMaxRequestBytes)
	fr := &frameReader{r: bytes.NewReader(in), max: DefaultMaxRequestBytes, versions: vs}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := fr.next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want the frame cut short", err)
	}
	// TotalAlloc counts every byte allocated, freed or not; kfake's own
	// reader would have allocated 100 MiB here.
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("reading 1 KiB of a frame that announces 100 MiB allocated %d bytes, want at most 1 MiB", got)
	}
}

// FuzzFrameReader feeds arbitrary bytes to the frame reader: it must never
// panic, never hand on a frame larger than the limit or of a key and version
// kfake does not serve, and never hand on more bytes than it read (but for
// the ApiVersions body it replaces).
func FuzzFrameReader(f *testing.F) {
	vs := testVersions(f)
	f.Add(issue16UnknownKey)
	f.Add(issue16Huge)
	f.Add(rawFrame(3, 99, nil))
	f.Add(rawFrame(18, 99, []byte{0}))
	f.Add(request(metadataRequest(1, "a", "b")))
	f.Add(request(metadataRequest(12, "a")))
	f.Add(request(kmsg.NewPtrApiVersionsRequest()))
	p := kmsg.NewPtrProduceRequest()
	p.Version = 9
	f.Add(request(p))
	f.Add(rawFrame(3, 1, []byte{0, 0, 0, 5}))
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := &frameReader{r: bytes.NewReader(data), max: max, versions: vs, chunk: 64}
		handed := 0
		for {
			frame, h, err := fr.next()
			if err != nil {
				return
			}
			if len(frame) > 4+max {
				t.Fatalf("handed on %d bytes, over the limit %d", len(frame), max)
			}
			if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
				t.Fatalf("size prefix %d for %d bytes", got, len(frame)-4)
			}
			r, ok := vs[h.Key]
			if !ok || h.Version < 0 || h.Key != apiKeyApiVersions && (h.Version < r.min || h.Version > r.max) {
				t.Fatalf("handed on %v, which kfake does not serve", h)
			}
			if _, err := parseRequest(frame[4:], vs); err != nil {
				t.Fatalf("handed on a frame that does not parse: %v", err)
			}
			if h.Key != apiKeyApiVersions || h.Version <= r.max {
				handed += len(frame)
				if handed > len(data) {
					t.Fatalf("handed on %d bytes of %d read", handed, len(data))
				}
			}
		}
	})
}
