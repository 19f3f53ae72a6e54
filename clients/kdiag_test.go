package clients

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/producer"
)

// TestReferenceProducerSettings reads `kdiag produce` command lines as the
// command applies them: the --config file (in the process's own
// filesystem), --set on top, then --reader and --callback-delay.
func TestReferenceProducerSettings(t *testing.T) {
	base := t.TempDir()
	rootfs := filepath.Join(base, "rootfs")
	writeFile(t, filepath.Join(rootfs, "app/producer.properties"), "bootstrap.servers=127.0.0.1:9092\nkdiag.reader=on-demand\nconnections.max.idle.ms=60000\n")
	writeFile(t, filepath.Join(rootfs, "etc/slow.properties"), "kdiag.callback.delay.ms=250\n")
	f := fixture{t: t, procRoot: filepath.Join(base, "proc"), fs: rootfs, pid: "300", args: []string{"kdiag", "produce"}, comm: "kdiag", exe: "/nonexistent-kdiag-fixture/kdiag"}
	pr, pid := f.build()
	p, err := openProc(pr, pid)
	if err != nil {
		t.Fatal(err)
	}
	def := producer.DefaultConfig()
	for _, tc := range []struct {
		name string
		args []string
		want ReferenceProducer
	}{
		{"defaults", nil, ReferenceProducer{Reader: "poll", ReaderFrom: "the default",
			ConnectionsMaxIdleMS: def.ConnectionsMaxIdle.Milliseconds(), IdleFrom: "the default"}},
		{"the README's walkthrough", []string{"--reader", "on-demand", "--set", "connections.max.idle.ms=-1"},
			ReferenceProducer{Reader: "on-demand", ReaderFrom: "--reader on-demand", ConnectionsMaxIdleMS: -1, IdleFrom: "--set connections.max.idle.ms=-1"}},
		{"--config relative to its working directory", []string{"--config", "producer.properties", "--bootstrap-server=127.0.0.1:19092"},
			ReferenceProducer{Reader: "on-demand", ReaderFrom: "--config producer.properties", ConnectionsMaxIdleMS: 60000, IdleFrom: "--config producer.properties", Config: "producer.properties"}},
		{"--set over --config, --reader over both", []string{"--config=producer.properties", "--set", "kdiag.reader=on-demand", "--set=connections.max.idle.ms=5000", "--reader=poll"},
			ReferenceProducer{Reader: "poll", ReaderFrom: "--reader poll", ConnectionsMaxIdleMS: 5000, IdleFrom: "--set connections.max.idle.ms=5000", Config: "producer.properties"}},
		{"callbacks", []string{"--config", "/etc/slow.properties", "--block-callbacks", "--producer-per-message"},
			ReferenceProducer{Reader: "poll", ReaderFrom: "the default", ConnectionsMaxIdleMS: def.ConnectionsMaxIdle.Milliseconds(), IdleFrom: "the default",
				BlockCallbacks: true, CallbackDelayMS: 250, ProducerPerMessage: true, Config: "/etc/slow.properties"}},
		{"--callback-delay over kdiag.callback.delay.ms", []string{"--config", "/etc/slow.properties", "--callback-delay", "2s", "--block-callbacks=false"},
			ReferenceProducer{Reader: "poll", ReaderFrom: "the default", ConnectionsMaxIdleMS: def.ConnectionsMaxIdle.Milliseconds(), IdleFrom: "the default",
				CallbackDelayMS: 2000, Config: "/etc/slow.properties"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ev := p.referenceProducer(tc.args, nil)
			if d := cmp.Diff(tc.want, *got); d != "" {
				t.Errorf("settings (-want +got):\n%s", d)
			}
			if !slices.Contains(ev, fmt.Sprintf("reader %s (%s)", tc.want.Reader, tc.want.ReaderFrom)) {
				t.Errorf("evidence %q does not say where the reader came from", ev)
			}
		})
	}
	// A config file gone since the process started: said, and left out.
	got, ev := p.referenceProducer([]string{"--config", "gone.properties", "--reader", "on-demand"}, nil)
	if got.Reader != "on-demand" || !strings.Contains(strings.Join(ev, "\n"), "--config gone.properties could not be read now") {
		t.Errorf("a missing --config: %+v, evidence %q", got, ev)
	}
}

// TestReferenceProducerCatalog holds the catalog's kdiag-produce entry to
// package producer: its idle default, its default reader (the entry's own
// values) and its variant (kdiag.reader=on-demand).
func TestReferenceProducerCatalog(t *testing.T) {
	lib, _ := Lookup(KdiagProduce)
	def := producer.DefaultConfig()
	if lib.IdleDefault != def.ConnectionsMaxIdle || lib.IdleSetting != "connections.max.idle.ms" {
		t.Errorf("catalog idle %s %s, package producer's default %s", lib.IdleSetting, lib.IdleDefault, def.ConnectionsMaxIdle)
	}
	if def.Reader != producer.ReaderPoll || !lib.ReadsIdle {
		t.Errorf("the default reader is %s; the catalog's default reads idle connections: %v", def.Reader, lib.ReadsIdle)
	}
	od := lib.WithVariant(producer.ReaderOnDemand.String())
	if od == lib || od.ReadsIdle || od.Fix == lib.Fix || od.Name != lib.Name || len(od.Variants) != 0 {
		t.Errorf("WithVariant(%q) = %+v, want the on-demand reader's entry", producer.ReaderOnDemand, od)
	}
	if lib.WithVariant(producer.ReaderPoll.String()) != lib {
		t.Error("WithVariant(poll) is not the default entry")
	}
	c := Client{Library: KdiagProduce, Kdiag: &Kdiag{Command: "produce", Role: RoleProducer, Producer: &ReferenceProducer{Reader: "on-demand"}}}
	if c.Catalog().ReadsIdle || c.NotAClient() || !c.IsKdiag() {
		t.Errorf("an on-demand kdiag produce: catalog %+v, not a client %v", c.Catalog(), c.NotAClient())
	}
}

func TestKdiagCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cmd  string
		rest []string
	}{
		{[]string{"/usr/local/bin/kdiag", "produce", "--reader", "poll"}, "produce", []string{"--reader", "poll"}},
		{[]string{"kdiag", "--proc-root", "/host/proc", "doctor"}, "doctor", []string{}},
		{[]string{"kdiag", "--proc-root=/host/proc", "broker", "--idle", "3s"}, "broker", []string{"--idle", "3s"}},
		{[]string{"kdiag"}, "", nil},
		{[]string{"kdiag", "frobnicate"}, "", nil},
	} {
		cmd, rest := kdiagCommand(tc.args)
		if cmd != tc.cmd || !slices.Equal(rest, tc.rest) {
			t.Errorf("kdiagCommand(%q) = %q %q, want %q %q", tc.args, cmd, rest, tc.cmd, tc.rest)
		}
	}
	got := parseFlags([]string{"--set", "a=1", "-v", "--reader=on-demand", "--block-callbacks", "--set", "--weird", "--", "--reader", "poll"}, produceValueFlags)
	want := []flagArg{{"set", "a=1"}, {"reader", "on-demand"}, {"block-callbacks", "true"}, {"set", "--weird"}}
	if !slices.Equal(got, want) {
		t.Errorf("parseFlags = %q, want %q", got, want)
	}
}

// TestKdiagSelf runs kdiag as users do, built from this tree, and
// identifies each process: `kdiag produce` as the reference producer with
// the reader and idle setting it runs with, and what it then does with
// the broker's idle close (the catalog's measurements); `kdiag broker` as
// a broker; kdiag repro's producers as started by it.
func TestKdiagSelf(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kdiag and runs it")
	}
	bin, err := testbin.BuildKdiag(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("commands", func(t *testing.T) {
		// kdiagCommands is kdiag's command list: check it against the
		// binary's own.
		out, err := exec.Command(bin, "--help").Output()
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		in := false
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "Available Commands:"):
				in = true
			case in && strings.HasPrefix(l, "  "):
				listed = append(listed, strings.Fields(l)[0])
			case in:
				in = false
			}
		}
		for _, c := range listed {
			if !slices.Contains(kdiagCommands, c) {
				t.Errorf("kdiag --help lists %q, which Identify does not know as a command", c)
			}
		}
		if len(listed) < 10 {
			t.Errorf("kdiag --help listed only %q", listed)
		}
	})
	t.Run("produce on-demand", func(t *testing.T) { testProduceOnDemand(t, bin) })
	t.Run("produce poll from --config", func(t *testing.T) { testProducePoll(t, bin) })
	t.Run("broker", func(t *testing.T) { testKdiagBroker(t, bin) })
	t.Run("repro's producers", func(t *testing.T) { testReproChildren(t, bin) })
}

// startKdiag starts bin with args in its own process group, killed at the
// end of the test, and returns it once its stderr has printed ready (at
// once for "").
func startKdiag(t *testing.T, bin, ready string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if ready == "" {
		go func() { _, _ = io.Copy(io.Discard, stderr) }()
		return cmd
	}
	seen := make(chan string, 1)
	go func() {
		var head strings.Builder
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			if !found {
				head.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), ready) {
					found = true
					seen <- ""
				}
			}
		}
		if !found {
			seen <- head.String()
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case out := <-seen:
		if out != "" {
			t.Fatalf("kdiag %s exited before %q:\n%s", args[0], ready, out)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("kdiag %s did not print %q within 90s", args[0], ready)
	}
	return cmd
}

// startCluster starts kdiag's broker in the test with one broker on a free
// port of 127.0.0.1. Its own idle close is 10 minutes, out of the test's
// way: the test closes idle connections itself (Cluster.CloseIdle).
func startCluster(t *testing.T) *broker.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := broker.Start(ctx, broker.Config{Brokers: 1, Ports: []int{0}, Idle: 10 * time.Minute, Topics: []string{"self"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// brokerSockets returns pid's sockets to the cluster by local port.
func brokerSockets(t *testing.T, pid int, c *broker.Cluster) map[uint16]netstat.Socket {
	t.Helper()
	br, err := netstat.ParseBrokers(c.BootstrapServers())
	if err != nil {
		t.Fatal(err)
	}
	s, err := netstat.NewScanner("/proc").Scan(context.Background(), netstat.Query{PIDs: []int{pid}, Brokers: br,
		States: netstat.States(netstat.Established, netstat.CloseWait, netstat.LastAck)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint16]netstat.Socket{}
	for _, k := range s.Sockets {
		out[k.Local.Port()] = k
	}
	return out
}

func countIn(socks map[uint16]netstat.Socket, st netstat.State) int {
	n := 0
	for _, s := range socks {
		if s.State == st {
			n++
		}
	}
	return n
}

// produceArgs are the flags of a kdiag produce that sends one record at
// start and then idles (the next one is an hour away).
func produceArgs(c *broker.Cluster, more ...string) []string {
	return append([]string{"produce", "--bootstrap-server", c.BootstrapServers(), "--topic", "self",
		"--interval", "1h", "--duration", "3m", "--log-level", "info"}, more...)
}

func identify(t *testing.T, pid int) Client {
	t.Helper()
	c, err := Identify("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testProduceOnDemand: the README's walkthrough. Identified as the
// reference producer on-demand with connections.max.idle.ms -1, with the
// on-demand fix; and it holds what the broker closes in CLOSE_WAIT, as the
// catalog says.
func testProduceOnDemand(t *testing.T, bin string) {
	c := startCluster(t)
	// Ready once the first record is acknowledged, not at "sending": until
	// then the producer has requests to write (ApiVersions, Metadata,
	// InitProducerId, Produce), and a connection the broker closes between
	// two of them is read at the next one and closed. A loaded machine
	// showed such passing states (Recv-Q 0 or a response unread, then
	// gone). After the ack nothing is sent for an hour.
	cmd := startKdiag(t, bin, "message 0 delivered", produceArgs(c, "--reader", "on-demand", "--set", "connections.max.idle.ms=-1")...)
	pid := cmd.Process.Pid
	got := identify(t, pid)
	if got.Library != KdiagProduce || got.Kdiag == nil || got.Kdiag.Role != RoleProducer || got.Kdiag.Producer == nil || got.NotAClient() {
		t.Fatalf("Identify = %+v, want kdiag's reference producer", got)
	}
	r := got.Kdiag.Producer
	want := ReferenceProducer{Reader: "on-demand", ReaderFrom: "--reader on-demand", ConnectionsMaxIdleMS: -1, IdleFrom: "--set connections.max.idle.ms=-1"}
	if d := cmp.Diff(want, *r); d != "" {
		t.Errorf("settings (-want +got):\n%s", d)
	}
	if s := got.String(); s != "kdiag produce (reference producer, reader on-demand, connections.max.idle.ms=-1)" {
		t.Errorf("String() = %q", s)
	}
	lib := got.Catalog()
	if lib == nil || lib.ReadsIdle || !strings.Contains(lib.Fix, "--reader on-demand") || strings.Contains(lib.Fix, "kgo.") {
		t.Fatalf("catalog entry %+v: want the on-demand reader's, which does not read idle connections, with its own fix", lib)
	}
	for _, e := range got.Evidence {
		if strings.Contains(e, "franz-go") {
			t.Errorf("evidence names franz-go: %q", got.Evidence)
		}
	}
	// Close every connection the broker can (none awaits a response once
	// the first record is acknowledged), until the producer holds only
	// CLOSE_WAIT.
	var socks map[uint16]netstat.Socket
	testio.WaitFor(t, 60*time.Second, "every connection of kdiag produce closed by the broker and in CLOSE_WAIT", func() bool {
		c.CloseIdle()
		socks = brokerSockets(t, pid, c)
		return len(socks) > 0 && countIn(socks, netstat.CloseWait) == len(socks)
	})
	for _, s := range socks {
		if s.RecvQ != 1 {
			t.Errorf("CLOSE_WAIT %s: Recv-Q %d, want 1 (the FIN, unread)", s.Local, s.RecvQ)
		}
	}
	// Held: nothing reads them until the next send, an hour away.
	time.Sleep(2 * time.Second)
	later := brokerSockets(t, pid, c)
	for port, s := range socks {
		if l, ok := later[port]; !ok || l.State != netstat.CloseWait || l.Inode != s.Inode {
			t.Errorf("CLOSE_WAIT %s: 2 s later %+v, want it still held", s.Local, l)
		}
	}
	if holds := !lib.ReadsIdle; !holds || !lib.Measured[0].HoldsCloseWait {
		t.Errorf("the catalog's on-demand entry says holds=%v, measured %+v; seen: holds", holds, lib.Measured)
	}
}

// testProducePoll: reader and idle setting from a --config file; with the
// poll reader, every connection the broker closes is closed by the
// producer at once, as the catalog says.
func testProducePoll(t *testing.T, bin string) {
	c := startCluster(t)
	cfg := filepath.Join(t.TempDir(), "producer.properties")
	must(t, os.WriteFile(cfg, []byte("kdiag.reader=poll\nconnections.max.idle.ms=600000\n"), 0o644))
	cmd := startKdiag(t, bin, "kdiag produce: sending", produceArgs(c, "--config", cfg)...)
	pid := cmd.Process.Pid
	got := identify(t, pid)
	if got.Kdiag == nil || got.Kdiag.Producer == nil {
		t.Fatalf("Identify = %+v, want kdiag's reference producer", got)
	}
	want := ReferenceProducer{Reader: "poll", ReaderFrom: "--config " + cfg, ConnectionsMaxIdleMS: 600000, IdleFrom: "--config " + cfg, Config: cfg}
	if d := cmp.Diff(want, *got.Kdiag.Producer); d != "" {
		t.Errorf("settings (-want +got):\n%s", d)
	}
	lib := got.Catalog()
	if lib == nil || !lib.ReadsIdle || lib.Measured[0].HoldsCloseWait {
		t.Fatalf("catalog entry %+v: want the poll reader's, which reads idle connections", lib)
	}
	// The connections open now; the broker closes them; each must be
	// gone (closed by the producer), none left in CLOSE_WAIT.
	var before map[uint16]netstat.Socket
	testio.WaitFor(t, 60*time.Second, "kdiag produce connected", func() bool {
		before = brokerSockets(t, pid, c)
		return countIn(before, netstat.Established) > 0
	})
	closed := 0
	testio.WaitFor(t, 60*time.Second, "a connection the broker closed, closed by kdiag produce, and none of them in CLOSE_WAIT", func() bool {
		closed += c.CloseIdle()
		now := brokerSockets(t, pid, c)
		gone := 0
		for port := range before {
			s, ok := now[port]
			switch {
			case !ok:
				gone++
			case s.State != netstat.Established:
				return false // CLOSE_WAIT or LAST_ACK: not yet closed
			}
		}
		return closed > 0 && gone > 0
	})
}

// testKdiagBroker: kdiag broker is a broker, not a client, with its idle.
func testKdiagBroker(t *testing.T, bin string) {
	cmd := startKdiag(t, bin, "broker listening", "broker", "--brokers", "1", "--ports", "0", "--idle", "3s", "--duration", "3m")
	got := identify(t, cmd.Process.Pid)
	if got.Identified() || !got.NotAClient() || got.Kdiag == nil || got.Kdiag.Role != RoleBroker || got.Kdiag.Command != "broker" {
		t.Fatalf("Identify = %+v, want kdiag's broker, not a client", got)
	}
	if got.Kdiag.BrokerIdleMS == nil || *got.Kdiag.BrokerIdleMS != 3000 {
		t.Errorf("broker idle %v, want 3000 ms", got.Kdiag.BrokerIdleMS)
	}
	if s := got.String(); s != "kdiag broker (kdiag's Kafka broker, not a client)" {
		t.Errorf("String() = %q", s)
	}
	if got.Catalog() != nil {
		t.Errorf("a broker has a client catalog entry: %+v", got.Catalog())
	}
}

// testReproChildren: the producers kdiag repro starts are the reference
// producer, started by it, with the reader and connections.max.idle.ms of
// their command lines; repro itself runs the embedded brokers.
func testReproChildren(t *testing.T, bin string) {
	// A scenario whose producer polls and one whose producer reads on
	// demand; the scenarios start side by side, each when its broker is
	// up, so the test waits for both producers, not for the first.
	scenarios := []string{"healthy", "passive-close"}
	cmd := startKdiag(t, bin, "", append([]string{"repro", "--duration", "20s"}, scenarios...)...)
	repro := cmd.Process.Pid
	var kids []int
	testio.WaitFor(t, 90*time.Second, "kdiag repro's producers started and identifiable", func() bool {
		kids = childrenOf(t, repro)
		if len(kids) < len(scenarios) {
			return false
		}
		for _, k := range kids {
			// Until exec, a child is a copy of kdiag repro.
			if c, err := Identify("/proc", k); err != nil || c.Kdiag == nil || c.Kdiag.Command != "produce" {
				return false
			}
		}
		return true
	})
	readers := map[string]bool{}
	for _, k := range kids {
		got := identify(t, k)
		r := got.Kdiag.Producer
		if got.Library != KdiagProduce || r == nil || got.Kdiag.StartedBy != fmt.Sprintf("kdiag repro (pid %d)", repro) {
			t.Errorf("child %d: %+v, want the reference producer started by kdiag repro (pid %d)", k, got, repro)
			continue
		}
		// repro sets the reader with --reader and the idle with --set.
		if r.ReaderFrom != "--reader "+r.Reader || r.IdleFrom != "--set connections.max.idle.ms="+strconv.FormatInt(r.ConnectionsMaxIdleMS, 10) {
			t.Errorf("child %d: %+v, want the reader from --reader and the idle from --set", k, r)
		}
		readers[r.Reader] = true
	}
	if !readers["poll"] || !readers["on-demand"] {
		t.Errorf("repro's producers ran with readers %v, want both poll and on-demand among its scenarios", readers)
	}
	got := identify(t, repro)
	if !got.NotAClient() || got.Kdiag.Role != RoleBroker || got.Kdiag.Command != "repro" {
		t.Errorf("kdiag repro: %+v, want its embedded brokers, not a client", got)
	}
}

// childrenOf lists the processes whose parent is pid (the ppid field of
// /proc/<pid>/stat).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	names, err := readDirNames("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, n := range names {
		k, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", n, "stat"))
		if err != nil {
			continue
		}
		if pp, err := parseStatPPID(st); err == nil && pp == pid {
			out = append(out, k)
		}
	}
	return out
}
