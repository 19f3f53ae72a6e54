package producer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
	"github.com/twmb/franz-go/pkg/kfake"
)

// logCapture is a slog handler that keeps every message in order.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

func (l *logCapture) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// index returns the position of the first line containing s, or -1.
func (l *logCapture) index(s string) int {
	for i, m := range l.lines() {
		if strings.Contains(m, s) {
			return i
		}
	}
	return -1
}

func (l *logCapture) dump(t *testing.T) {
	t.Helper()
	for _, m := range l.lines() {
		t.Log(m)
	}
}

// brokerConns tracks the connections a test cluster accepted, so that the
// test can close them as a broker's connections.max.idle.ms reaper would,
// at a moment it chooses (idleClose) rather than on a timer that would race
// the producer.
type brokerConns struct {
	mu    sync.Mutex
	conns []net.Conn
}

type trackingListener struct {
	net.Listener
	b *brokerConns
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.b.mu.Lock()
		l.b.conns = append(l.b.conns, c)
		l.b.mu.Unlock()
	}
	return c, err
}

// idleClose closes every connection accepted so far, as the broker closes
// idle ones: call it once none has a request pending, so that each close is
// what an idle close is (a FIN the producer does not expect). It returns
// how many it closed.
func (b *brokerConns) idleClose() int {
	b.mu.Lock()
	all := b.conns
	b.conns = nil
	b.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
	return len(all)
}

// newCluster starts kfake on 127.0.0.1.
func newCluster(t *testing.T, brokers int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, _ := newClosingCluster(t, brokers, opts...)
	return c
}

// newClosingCluster is newCluster with the connections it accepts, for the
// test to close (brokerConns.idleClose).
func newClosingCluster(t *testing.T, brokers int, opts ...kfake.Opt) (*kfake.Cluster, *brokerConns) {
	t.Helper()
	b := &brokerConns{}
	listen := func(network, addr string) (net.Listener, error) {
		host, port, _ := net.SplitHostPort(addr)
		if host == "" {
			host = "127.0.0.1"
		}
		ln, err := net.Listen("tcp4", net.JoinHostPort(host, port))
		if err != nil {
			return nil, err
		}
		return &trackingListener{Listener: ln, b: b}, nil
	}
	all := append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.ListenFn(listen)}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, b
}

// waitReady waits until the producer has recorded the API versions of every
// node in ids: each of those connections has had its last response, and
// nothing is pending on it until the next send or metadata refresh.
func waitReady(t *testing.T, logs *logCapture, ids ...int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("API versions of nodes %v", ids), func() bool {
		for _, id := range ids {
			if logs.index(fmt.Sprintf("Recorded API versions for node %d:", id)) < 0 {
				return false
			}
		}
		return true
	})
}

// newProducer builds a producer for the cluster with props on top of a
// fast test configuration, logging into a capture.
func newProducer(t *testing.T, c *kfake.Cluster, props map[string]string) (*Producer, *logCapture) {
	t.Helper()
	all := map[string]string{
		"bootstrap.servers":  strings.Join(c.ListenAddrs(), ","),
		"linger.ms":          "0",
		"request.timeout.ms": "5000",
	}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := ParseConfig(all)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{}
	p, err := New(cfg, WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
		if t.Failed() {
			logs.dump(t)
		}
	})
	return p, logs
}

// produceSync sends one record and waits for its callback.
func produceSync(t *testing.T, p *Producer, r Record) (RecordMetadata, error) {
	t.Helper()
	type result struct {
		md  RecordMetadata
		err error
	}
	ch := make(chan result, 1)
	if err := p.Send(context.Background(), r, func(md RecordMetadata, err error) { ch <- result{md, err} }); err != nil {
		return RecordMetadata{}, err
	}
	select {
	case res := <-ch:
		return res.md, res.err
	case <-time.After(20 * time.Second):
		t.Fatal("no callback within 20s")
		return RecordMetadata{}, nil
	}
}

// waitFor polls cond until it holds or 15 s pass (a bound, not a timing
// assertion: the conditions normally hold within a second).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clientSockets returns this process's TCP sockets whose remote end is one
// of the cluster's brokers: the producer's side of its connections.
func clientSockets(t *testing.T, c *kfake.Cluster) []netstat.Socket {
	t.Helper()
	ports := map[uint16]bool{}
	for _, a := range c.ListenAddrs() {
		_, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		ports[uint16(n)] = true
	}
	socks, err := netstat.ReadProcNetTCP("/proc", 0, netstat.AllStates)
	if err != nil {
		t.Fatal(err)
	}
	var out []netstat.Socket
	lo := netip.MustParseAddr("127.0.0.1")
	for _, s := range socks {
		if s.Remote.Addr() == lo && ports[s.Remote.Port()] && s.State != netstat.Listen {
			out = append(out, s)
		}
	}
	return out
}

func countState(socks []netstat.Socket, st netstat.State) int {
	n := 0
	for _, s := range socks {
		if s.State == st {
			n++
		}
	}
	return n
}

func describe(socks []netstat.Socket) string {
	var b bytes.Buffer
	for _, s := range socks {
		fmt.Fprintf(&b, "%s -> %s %s; ", s.Local, s.Remote, s.State)
	}
	return b.String()
}
