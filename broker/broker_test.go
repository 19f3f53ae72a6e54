package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdiag/kdiag/internal/testio"
)

// startTest starts a cluster on free ports and closes it at the test's end.
func startTest(t *testing.T, cfg Config) (*Cluster, *testio.SyncBuffer) {
	t.Helper()
	logs := &testio.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Ports == nil {
		n := cfg.Brokers
		if n == 0 {
			n = 1
		}
		cfg.Ports = make([]int, n)
	}
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, logs
}

// waitFor polls cond until it holds or d passes; the bound only keeps a
// broken test from hanging, it is not what the test checks.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiVersions sends ApiVersions v0 (key 18) on conn and reads its response.
func apiVersions(t *testing.T, conn net.Conn, corr int32) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("broker-test")).AppendRequest(nil, req, corr)
	if _, err := conn.Write(buf); err != nil {
		t.Fatalf("write ApiVersions: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	size := make([]byte, 4)
	if _, err := io.ReadFull(conn, size); err != nil {
		t.Fatalf("read ApiVersions response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("read ApiVersions response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(body[:4])); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatalf("parse ApiVersions response: %v", err)
	}
	if len(resp.ApiKeys) == 0 {
		t.Fatal("ApiVersions response lists no API keys")
	}
}

// idleCounts returns how many connections are open and how many of those
// are idle now (no request being read or answered), as CloseIdle sees them.
func idleCounts(c *Cluster) (open, idle int) {
	for _, l := range c.lns {
		l.mu.Lock()
		for tc := range l.conns {
			open++
			if tc.idleNow() {
				idle++
			}
		}
		l.mu.Unlock()
	}
	return open, idle
}

// allIdleNow says the cluster has open connections and every one is idle
// now, so that CloseIdle closes them all.
func allIdleNow(c *Cluster) bool {
	open, idle := idleCounts(c)
	return open > 0 && idle == open
}

// TestIdleConnectionIsClosedByBroker runs the reaper itself. The client
// sends nothing, so nothing it does can lose a race with the timer: the test
// waits for the close the timer causes.
func TestIdleConnectionIsClosedByBroker(t *testing.T) {
	c, logs := startTest(t, Config{Idle: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The broker must close, and the client sees EOF.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after idle: %v, want EOF (the broker's FIN)", err)
	}
	got := c.Stats().Counts
	want := Counts{Accepted: 1, ClosedIdle: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	// The close is counted before the socket closes and logged after it,
	// so the log line can trail the client's EOF and the count.
	waitFor(t, 5*time.Second, "broker logs the idle close", func() bool { return strings.Contains(logs.String(), "closed connection") })
	for _, s := range []string{"accepted connection", "closed connection", "reason=idle", "node=0", "remote=" + conn.LocalAddr().String()} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs)
		}
	}
}

// TestActivityResetsIdleClock checks the reaper's rule at chosen instants
// rather than by sleeping against its timer: a connection expires idle
// after its last request or response, and each one moves that instant on.
func TestActivityResetsIdleClock(t *testing.T) {
	idle := time.Minute
	c, _ := startTest(t, Config{}) // no reaper: the test calls its rule
	conn, err := net.Dial("tcp", c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	l := c.lns[0]
	waitFor(t, 5*time.Second, "broker accepts", func() bool { return c.Stats().Open == 1 })
	var tc *trackedConn
	l.mu.Lock()
	for k := range l.conns {
		tc = k
	}
	l.mu.Unlock()

	last := tc.lastActivity()
	for i := int32(1); i <= 3; i++ {
		before := time.Now()
		apiVersions(t, conn, i)
		// The response was written, so the clock moved past before.
		if got := tc.lastActivity(); got.Before(before) || !got.After(last) {
			t.Fatalf("request %d: last activity %v, want after %v and %v", i, got, last, before)
		}
		last = tc.lastActivity()
		if exp := l.expired(last.Add(idle), idle); len(exp) != 0 {
			t.Fatalf("request %d: expired exactly idle after the last activity; Kafka closes only past it", i)
		}
		if exp := l.expired(last.Add(idle+time.Millisecond), idle); len(exp) != 1 || exp[0] != tc {
			t.Fatalf("request %d: not expired idle+1ms after the last activity: %v", i, exp)
		}
	}
}

// TestCloseIdleLeavesBusyConnections: CloseIdle closes a connection that
// waits for nothing and leaves one whose request is half read or whose
// response is pending.
func TestCloseIdleLeavesBusyConnections(t *testing.T) {
	c, logs := startTest(t, Config{Topics: []string{"t"}})
	addr := c.Addrs()[0]
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	apiVersions(t, idle, 1)

	half, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	f := request(metadataRequest(1, "t"))
	if _, err := half.Write(f[:len(f)-2]); err != nil {
		t.Fatal(err)
	}

	// A Fetch that kfake parks for up to 10 minutes, longer than the
	// test can live (go test's default timeout): its response is pending
	// whatever the machine's load.
	fetching, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fetching.Close()
	fr := kmsg.NewPtrFetchRequest()
	fr.Version = 11
	fr.MaxWaitMillis = int32((10 * time.Minute).Milliseconds())
	fr.MinBytes = 1
	fr.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	if _, err := fetching.Write(request(fr)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "broker reads the half request and the fetch", func() bool {
		open, idle := idleCounts(c)
		return open == 3 && idle == 1
	})

	if n := c.CloseIdle(); n != 1 {
		t.Fatalf("CloseIdle closed %d connections, want the idle one only", n)
	}
	_ = idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	if s := c.Stats(); s.Open != 2 || s.ClosedIdle != 1 {
		t.Errorf("stats %+v, want the half-read and the fetching connection open, one idle close", s.Counts)
	}
	waitFor(t, 5*time.Second, "the idle close is logged", func() bool { return strings.Contains(logs.String(), "reason=idle") })

	// Once the half-read request is whole and answered, it is idle too.
	if _, err := half.Write(f[len(f)-2:]); err != nil {
		t.Fatal(err)
	}
	_ = half.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(half, size[:]); err != nil {
		t.Fatalf("metadata response: %v", err)
	}
	if _, err := io.ReadFull(half, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
		t.Fatalf("metadata response: %v", err)
	}
	waitFor(t, 10*time.Second, "CloseIdle closes the answered connection", func() bool { return c.CloseIdle() == 1 })
	if s := c.Stats(); s.Open != 1 {
		t.Errorf("stats %+v, want only the fetching connection open", s.Counts)
	}
}

// TestCloseIdleConnClosesThatOne: CloseIdleConn closes the idle connection
// of the client address it names, and no other.
func TestCloseIdleConnClosesThatOne(t *testing.T) {
	c, _ := startTest(t, Config{Brokers: 2})
	var conns []net.Conn
	for _, addr := range []string{c.Addrs()[0], c.Addrs()[0], c.Addrs()[1]} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		apiVersions(t, conn, 1)
		conns = append(conns, conn)
	}
	waitFor(t, 10*time.Second, "all three idle", func() bool { open, idle := idleCounts(c); return open == 3 && idle == 3 })
	if c.CloseIdleConn("127.0.0.1:1") {
		t.Error("CloseIdleConn closed a connection of an address no client has")
	}
	if !c.CloseIdleConn(conns[1].LocalAddr().String()) {
		t.Fatalf("CloseIdleConn(%s) closed nothing", conns[1].LocalAddr())
	}
	_ = conns[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conns[1].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the named connection: read %v, want EOF", err)
	}
	if s := c.Stats(); s.Open != 2 || s.ClosedIdle != 1 {
		t.Errorf("stats %+v, want the other two open and one idle close", s.Counts)
	}
	if c.CloseIdleConn(conns[1].LocalAddr().String()) {
		t.Error("CloseIdleConn closed the same connection twice")
	}
}

func TestClientCloseAndShutdownAreCounted(t *testing.T) {
	c, logs := startTest(t, Config{Brokers: 2})
	a, err := net.Dial("tcp", c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	apiVersions(t, a, 1)
	a.Close()
	waitFor(t, 5*time.Second, "broker sees the client's close", func() bool { return c.Stats().ClosedByClient == 1 })

	b, err := net.Dial("tcp", c.Addrs()[1])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	apiVersions(t, b, 1)
	c.Close()
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Close: %v, want EOF", err)
	}
	got := c.Stats()
	want := Stats{
		Counts: Counts{Accepted: 2, ClosedByClient: 1, ClosedShutdown: 1},
		Brokers: []BrokerStats{
			{Node: 0, Addr: c.Addrs()[0], Counts: Counts{Accepted: 1, ClosedByClient: 1}},
			{Node: 1, Addr: c.Addrs()[1], Counts: Counts{Accepted: 1, ClosedShutdown: 1}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), `reason="client closed (EOF)"`) || !strings.Contains(logs.String(), "reason=shutdown") {
		t.Errorf("log lacks the close reasons:\n%s", logs)
	}
	c.Close() // a second Close is harmless
}

func TestContextCancelClosesCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Start(ctx, Config{Ports: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.Addrs()[0]
	cancel()
	waitFor(t, 5*time.Second, "listener closed after cancel", func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}

func TestPortsAndAddresses(t *testing.T) {
	c, _ := startTest(t, Config{Brokers: 3})
	addrs := c.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs = %v, want 3", addrs)
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Errorf("address %q: want 127.0.0.1:<port>", a)
		}
	}
	if got, want := c.BootstrapServers(), strings.Join(addrs, ","); got != want {
		t.Errorf("BootstrapServers = %q, want %q", got, want)
	}

	if _, err := Start(context.Background(), Config{Brokers: 2, Ports: []int{0}}); err == nil || !strings.Contains(err.Error(), "one port per broker") {
		t.Errorf("2 brokers, 1 port: err = %v", err)
	}
	_, busy, _ := net.SplitHostPort(addrs[0])
	p, _ := strconv.Atoi(busy)
	if _, err := Start(context.Background(), Config{Ports: []int{p}}); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("busy port: err = %v", err)
	}
	if _, err := Start(context.Background(), Config{Listen: "localhost"}); err == nil || !strings.Contains(err.Error(), "not an IP address") {
		t.Errorf("listen on a name: err = %v", err)
	}
}

func TestDefaultPortsFallBackWhenBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	first := busy.Addr().(*net.TCPAddr).Port
	lns, notes, err := listenAll("127.0.0.1", nil, 2, first)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lns {
		defer l.Close()
		if l.Addr().(*net.TCPAddr).Port == first {
			t.Errorf("bound the busy port %d", first)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "not free") {
		t.Errorf("notes = %q, want one saying the defaults are not free", notes)
	}
}

func TestIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback on this machine:", err)
	}
	ln.Close()
	c, _ := startTest(t, Config{Listen: "::1"})
	if a := c.Addrs()[0]; !strings.HasPrefix(a, "[::1]:") {
		t.Fatalf("address %q, want [::1]:<port>", a)
	}
	conn, err := net.Dial("tcp", c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	apiVersions(t, conn, 7)
	waitFor(t, 5*time.Second, "the connection is idle now", func() bool { return allIdleNow(c) })
	if n := c.CloseIdle(); n != 1 {
		t.Fatalf("CloseIdle closed %d, want 1", n)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the idle close on ::1: %v, want EOF", err)
	}
}
