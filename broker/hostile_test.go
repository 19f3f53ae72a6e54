package broker

// Hostile input on the broker's port (issue 16): the frames that killed
// kfake, frames cut short, and a bounded run of random ones, over loopback.
// The broker must close only the offending connection, log why, stay under
// a memory bound and go on serving real clients.

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialBroker connects to addr, closed at the test's end.
func dialBroker(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.(*net.TCPConn)
}

// readUntilClosed reads conn until the broker closes it, and fails the test
// if it has not within the bound (it would be holding a refused frame).
func readUntilClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the broker did not close the connection within 10s", what)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read: %v, want EOF or a reset", what, err)
	}
}

func TestRefusedFrameClosesOnlyItsConnection(t *testing.T) {
	c, logs := startTest(t, Config{MaxRequestBytes: 4096})
	addr := c.Addrs()[0]
	good := dialBroker(t, addr)
	apiVersions(t, good, 1)

	over := binary.BigEndian.AppendUint32(nil, 4097)
	tests := []struct {
		name  string
		frame []byte
		log   string
	}{
		{"issue 16: unknown api key 12345", issue16UnknownKey, `error="unknown API key 12345 (Unknown)"`},
		{"issue 16: size 0x7fffffff", issue16Huge, "larger than socket.request.max.bytes 4096"},
		{"one byte over MaxRequestBytes", over, "size 4097 larger than socket.request.max.bytes 4096"},
		{"negative size", []byte{0x80, 0, 0, 0}, "size -2147483648 is negative"},
		{"metadata v99", rawFrame(3, 99, nil), "Metadata (key 3) v99, the broker serves v0-v13"},
		{"produce v2, below kfake's min", rawFrame(0, 2, nil), "Produce (key 0) v2, the broker serves v3-v13"},
		{"LeaderAndISR, which kfake does not serve", rawFrame(4, 0, nil), "unknown API key 4 (LeaderAndISR)"},
		{"metadata v1 body cut short", rawFrame(3, 1, []byte{0, 0, 0, 5}), "Metadata (key 3) v1 body: not enough data"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := dialBroker(t, addr)
			if _, err := bad.Write(tt.frame); err != nil {
				t.Fatal(err)
			}
			readUntilClosed(t, bad, tt.name)
			waitFor(t, 10*time.Second, "the refusal is logged", func() bool { return strings.Contains(logs.String(), tt.log) })
			if s := c.Stats(); s.ClosedInvalid != i+1 || s.Open != 1 {
				t.Errorf("stats %+v, want %d closed for an invalid request and the good connection open", s.Counts, i+1)
			}
			// The other connection goes on.
			apiVersions(t, good, int32(i+2))
		})
	}
	for _, s := range []string{`reason="invalid request"`, "level=WARN"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs)
		}
	}
}

func TestUnsupportedApiVersionsIsAnsweredAsKafkaDoes(t *testing.T) {
	c, _ := startTest(t, Config{})
	conn := dialBroker(t, c.Addrs()[0])
	// v99 with a flexible header and a body no version decodes: Kafka
	// answers it with v0 UNSUPPORTED_VERSION and its ApiVersions range.
	f := rawFrame(18, 99, []byte{0, 0xff, 0xff})
	binary.BigEndian.PutUint32(f[8:], 77) // correlation id
	if _, err := conn.Write(f); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 77 {
		t.Fatalf("correlation id %d, want 77", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 5}}
	if resp.ErrorCode != 35 || !slices.EqualFunc(resp.ApiKeys, want, func(a, b kmsg.ApiVersionsResponseApiKey) bool {
		return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
	}) {
		t.Fatalf("response: error %d, keys %+v; want UNSUPPORTED_VERSION (35) and %+v", resp.ErrorCode, resp.ApiKeys, want)
	}
	apiVersions(t, conn, 78) // and the client retries at v0 on the same connection
}

// hostileRun sends the frames of issue 16 and many more, one connection
// each, and returns how many connections it made.
func hostileRun(t *testing.T, addr string, rng *rand.Rand) int {
	t.Helper()
	conns := 0
	send := func(what string, b []byte) {
		conn := dialBroker(t, addr)
		conns++
		if _, err := conn.Write(b); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("%s: write: %v", what, err)
		}
		// Half-close: the broker reads EOF after the frame, so a frame
		// it accepts ends the connection too, and every one is bounded.
		_ = conn.CloseWrite()
		readUntilClosed(t, conn, what)
		conn.Close()
	}

	// The frames of issue 16; the huge size on two connections, as there.
	send("issue 16 unknown key", issue16UnknownKey)
	send("issue 16 huge size", issue16Huge)
	send("issue 16 huge size, again", issue16Huge)

	// Every key and version kfake serves, with its default body and with
	// random bytes after the header.
	vs := testVersions(t)
	keys := make([]int16, 0, len(vs))
	for k := range vs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for v := vs[k].min; v <= vs[k].max; v++ {
			r := kmsg.RequestForKey(k)
			r.SetVersion(v)
			send(kmsg.NameForKey(k)+" default", request(r))
			tail := make([]byte, rng.IntN(256))
			for i := range tail {
				tail[i] = byte(rng.Uint32())
			}
			send(kmsg.NameForKey(k)+" random body", rawFrame(k, v, tail))
		}
	}

	// A request cut at every length, the client closing mid-frame.
	m := request(metadataRequest(1, "cut"))
	for n := 1; n < len(m); n++ {
		send("truncated", m[:n])
	}

	// Random bytes, random sizes.
	for range 300 {
		b := make([]byte, 1+rng.IntN(2048))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		send("random", b)
	}
	return conns
}

func TestHostileFramesLeaveBrokerServing(t *testing.T) {
	// A bound on queued request bytes as large as the frames the holders
	// announce, so that they are held rather than refused on their size:
	// each holds room for what it sent, not what it announced, and the
	// hostile run's frames are read beside them.
	c, logs := startTest(t, Config{Brokers: 1, MaxQueuedRequestBytes: DefaultMaxRequestBytes})
	addr := c.Addrs()[0]
	seed := uint64(16)
	rng := rand.New(rand.NewPCG(seed, seed))

	var before, held, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// Connections that announce the largest frame allowed and send 1 KiB
	// of it, held open: kfake alone allocates the announced 100 MiB for
	// each.
	const holders = 20
	var hold []*net.TCPConn
	for range holders {
		conn := dialBroker(t, addr)
		f := rawFrame(0, 9, make([]byte, 1024))
		binary.BigEndian.PutUint32(f, DefaultMaxRequestBytes)
		if _, err := conn.Write(f); err != nil {
			t.Fatal(err)
		}
		hold = append(hold, conn)
	}
	waitFor(t, 10*time.Second, "the broker accepts the held connections", func() bool { return c.Stats().Open == holders })
	runtime.ReadMemStats(&held)

	conns := hostileRun(t, addr, rng)
	for _, conn := range hold {
		conn.Close()
	}
	runtime.ReadMemStats(&after)

	// TotalAlloc counts every byte allocated, freed or not. Unguarded,
	// kfake allocates 2 GiB for each announced 0x7fffffff and 100 MiB for
	// each held frame: 6 GiB here. 256 MiB is the bound for what a
	// thousand short connections cost.
	const bound = 256 << 20
	heldAlloc, total := held.TotalAlloc-before.TotalAlloc, after.TotalAlloc-before.TotalAlloc
	t.Logf("seed %d: %d hostile connections, %d held: allocated %.1f MiB in all (%.1f MiB for the held ones), heap in use %.1f -> %.1f MiB",
		seed, conns, holders, float64(total)/(1<<20), float64(heldAlloc)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20))
	if heldAlloc > 16<<20 {
		t.Errorf("%d connections holding 1 KiB of a 100 MiB frame made the broker allocate %d bytes, want at most 16 MiB", holders, heldAlloc)
	}
	if total > bound {
		t.Errorf("the hostile run made the broker allocate %d bytes, want at most %d", total, bound)
	}

	s := c.Stats()
	if s.ClosedInvalid < 100 || s.Accepted != conns+holders {
		t.Errorf("stats %+v after %d connections: want every one accepted and at least 100 refused", s.Counts, conns+holders)
	}
	for _, want := range []string{"unknown API key 12345", "size 2147483647 larger than socket.request.max.bytes", "closed mid-request"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}

	// The broker still serves: franz-go produces and consumes...
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("after-hostile"),
		kgo.ConsumeTopics("after-hostile"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("still here")).FirstErr(); err != nil {
		t.Fatalf("produce after the hostile run: %v", err)
	}
	var got []string
	for len(got) < 1 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"still here"}) {
		t.Fatalf("consumed %q after the hostile run", got)
	}

	// ...and so does kcat.
	t.Run("kcat", func(t *testing.T) {
		kc := requireKcat(t)
		kcat(t, kc, "kcat after the hostile run\n", "-b", addr, "-P", "-t", "kcat-after-hostile")
		out := kcat(t, kc, "", "-b", addr, "-C", "-t", "kcat-after-hostile", "-c", "1", "-e")
		if strings.TrimSpace(out) != "kcat after the hostile run" {
			t.Fatalf("kcat consumed %q", out)
		}
	})
}
