package produce

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ProduceOptions
		wantErr string
	}{
		{
			name: "defaults",
			want: ProduceOptions{Topic: "kdiag-repro", Interval: time.Second, LogLevel: "info", LogFormat: "text"},
		},
		{
			name: "all",
			args: []string{"--config", "p.properties", "--bootstrap-server", "127.0.0.1:9092,127.0.0.1:9093",
				"--set", "linger.ms=0", "--set", "acks=1", "--topic", "x", "--messages", "3", "--interval", "250ms",
				"--reader", "on-demand", "--model", "java-2.1", "--callback-delay", "2s", "--block-callbacks", "--producer-per-message", "--duration", "1m",
				"--log-level", "debug", "--log-format", "json", "--stats-json"},
			want: ProduceOptions{ConfigFile: "p.properties", Bootstrap: "127.0.0.1:9092,127.0.0.1:9093",
				Set: []string{"linger.ms=0", "acks=1"}, Topic: "x", Messages: 3, Interval: 250 * time.Millisecond,
				Reader: "on-demand", Model: "java-2.1", CallbackDelay: 2 * time.Second, CallbackDelaySet: true, BlockCallbacks: true, ProducerPerMessage: true,
				Duration: time.Minute, LogLevel: "debug", LogFormat: "json", StatsJSON: true},
		},
		{name: "bad reader", args: []string{"--reader", "select"}, wantErr: `--reader: "select" is not a reader mode (want poll or on-demand)`},
		{name: "bad model", args: []string{"--model", "java-4"}, wantErr: `--model: "java-4" is not a model (want java-3.9 or java-2.1)`},
		{name: "bad set", args: []string{"--set", "linger.ms"}, wantErr: `--set: "linger.ms" is not key=value`},
		{name: "bad level", args: []string{"--log-level", "trace"}, wantErr: `--log-level: "trace": want debug, info or warn`},
		{name: "bad format", args: []string{"--log-format", "logfmt"}, wantErr: `--log-format: "logfmt": want text or json`},
		{name: "negative", args: []string{"--messages", "-1"}, wantErr: "must not be negative"},
		{name: "args", args: []string{"extra"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *ProduceOptions
			cmd := NewCmdProduce(&cmdutil.Factory{IO: ios}, func(o *ProduceOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Release == nil {
				t.Error("no Release channel (SIGUSR1) set")
			}
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(ProduceOptions{}, "IO", "Context", "Release")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "producer.properties")
	if err := os.WriteFile(file, []byte("# test\nbootstrap.servers=127.0.0.1:1\nlinger.ms=5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    ProduceOptions
		wantErr string
	}{
		{"no bootstrap", ProduceOptions{}, "no bootstrap servers: give --bootstrap-server"},
		{"file value", ProduceOptions{ConfigFile: file}, `producer.properties:3: linger.ms: "5s" is not a number of milliseconds`},
		{"override value", ProduceOptions{Bootstrap: "127.0.0.1:1", Set: []string{"acks=2"}}, `override: acks: "2" is not one of all, -1, 0, 1`},
		{"missing file", ProduceOptions{ConfigFile: filepath.Join(dir, "nope")}, "no such file or directory"},
		{"compression", ProduceOptions{Bootstrap: "127.0.0.1:1", Set: []string{"compression.type=brotli"}}, `override: compression.type: "brotli" is not one of none, gzip, snappy, lz4, zstd`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			o := tt.opts
			o.IO, o.Topic, o.LogLevel = ios, "t", "info"
			err := runProduce(&o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if code := cmdutil.ExitCode(err); code != cmdutil.ExitUsage {
				t.Errorf("exit code %d, want %d", code, cmdutil.ExitUsage)
			}
		})
	}
}

// TestConfigTakesWhatJavaTakes: values the Java client accepts (no
// validator on the key) and kdiag lint accepts are not refused here either.
func TestConfigTakesWhatJavaTakes(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	o := &ProduceOptions{IO: ios, Bootstrap: "127.0.0.1:9092", Topic: "t", LogLevel: "info",
		Set: []string{"socket.connection.setup.timeout.ms=-1", "socket.connection.setup.timeout.max.ms=-1"}}
	cfg, err := o.config()
	if err != nil {
		t.Fatalf("--set socket.connection.setup.timeout.ms=-1: %v", err)
	}
	if cfg.SocketConnectionSetupTimeout != -time.Millisecond || cfg.SocketConnectionSetupTimeoutMax != -time.Millisecond {
		t.Errorf("setup timeout %v, max %v: want -1ms each", cfg.SocketConnectionSetupTimeout, cfg.SocketConnectionSetupTimeoutMax)
	}
}

// TestEndToEnd runs `kdiag produce --messages 3 --stats-json` against kfake
// and reads the three messages back.
func TestEndToEnd(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ios, _, out, errOut := cmdutil.Test()
	cmd := NewCmdProduce(&cmdutil.Factory{IO: ios}, nil)
	cmd.SetArgs([]string{"--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "--topic", "e2e",
		"--messages", "3", "--interval", "10ms", "--log-level", "debug", "--stats-json", "--set", "linger.ms=0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var st statsJSON
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if st.RecordsAcked != 3 || st.RecordsFailed != 0 || st.Producers != 1 || st.ConnectionsOpen != 0 ||
		st.ConnectionsOpened < 2 || st.ClosedOnClose != st.ConnectionsOpened || st.MetadataRequests < 1 {
		t.Errorf("stats: %+v", st)
	}
	for _, want := range []string{"Initiating connection to node", "Sending metadata request", "message 2 delivered to e2e-0@2"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("e2e"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var vals []string
	for len(vals) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	want := []string{"kdiag produce message 0", "kdiag produce message 1", "kdiag produce message 2"}
	if diff := cmp.Diff(want, vals); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestProducerPerMessage: each message gets its own producer, none closed.
func TestProducerPerMessage(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "leak"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ios, _, out, errOut := cmdutil.Test()
	o := &ProduceOptions{IO: ios, Bootstrap: strings.Join(c.ListenAddrs(), ","), Topic: "leak", Messages: 3,
		Interval: 10 * time.Millisecond, ProducerPerMessage: true, LogLevel: "info", StatsJSON: true}
	if err := runProduce(o); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var st statsJSON
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	// One bootstrap and one broker connection per producer, all still open.
	if st.Producers != 3 || st.RecordsAcked != 3 || st.ClosedOnClose != 0 || st.ConnectionsOpen != 6 {
		t.Errorf("stats: %+v", st)
	}
}

// TestStopBySignalAndDuration: with --messages 0 the run ends on the
// context (SIGINT/SIGTERM in a real run) or --duration, closes the producer
// and exits 0 with the counters. The signal comes once a message was
// delivered; --duration is a timer the producer races by design, so there
// it is only checked that what was sent was completed, acked or failed.
func TestStopBySignalAndDuration(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "stop"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		name     string
		duration time.Duration
	}{
		{"signal", 0},
		{"duration", 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var errOut testio.SyncBuffer
			ios, _, out, _ := cmdutil.Test()
			ios.ErrOut = &errOut
			o := &ProduceOptions{IO: ios, Context: ctx, Bootstrap: c.ListenAddrs()[0], Topic: "stop",
				Interval: 50 * time.Millisecond, Duration: tt.duration, LogLevel: "info", StatsJSON: true}
			done := make(chan error, 1)
			go func() { done <- runProduce(o) }()
			if tt.duration == 0 {
				waitLog(t, &errOut, "message 0 delivered")
				cancel()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v\n%s", err, errOut.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("run did not stop")
			}
			var st statsJSON
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.RecordsAcked+st.RecordsFailed < 1 || st.ConnectionsOpen != 0 || st.ClosedOnClose != st.ConnectionsOpened {
				t.Errorf("stats: %+v", st)
			}
			if tt.duration == 0 && st.RecordsAcked < 1 {
				t.Errorf("stats: %+v, want the delivered message acked", st)
			}
		})
	}
}

// TestBlockCallbacks: with --block-callbacks the first callback blocks the
// network goroutine (no message is reported delivered) until Release is
// closed; then every message is delivered and none blocks again.
func TestBlockCallbacks(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "block"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		name    string
		release bool // else the run's end (a signal) ends the block
	}{{"released", true}, {"signalled", false}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			release := make(chan struct{})
			var errOut testio.SyncBuffer
			ios, _, out, _ := cmdutil.Test()
			ios.ErrOut = &errOut
			o := &ProduceOptions{IO: ios, Context: ctx, Bootstrap: c.ListenAddrs()[0], Topic: "block", Messages: 3,
				Interval: 10 * time.Millisecond, BlockCallbacks: true, Release: release, LogLevel: "info", StatsJSON: true,
				Set: []string{"linger.ms=0"}}
			done := make(chan error, 1)
			go func() { done <- runProduce(o) }()
			waitLog(t, &errOut, "message 0: callback blocking the network goroutine until SIGUSR1")
			if strings.Contains(errOut.String(), "delivered") {
				t.Fatalf("a message reported delivered while the first callback blocks:\n%s", errOut.String())
			}
			if tt.release {
				close(release)
			} else {
				cancel()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v\n%s", err, errOut.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("run did not end after the block was lifted")
			}
			var st statsJSON
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if tt.release {
				for _, m := range []string{"callbacks released", "message 0 delivered", "message 2 delivered"} {
					if !strings.Contains(errOut.String(), m) {
						t.Errorf("stderr lacks %q:\n%s", m, errOut.String())
					}
				}
				if st.RecordsAcked != 3 {
					t.Errorf("stats: %+v, want 3 acked", st)
				}
			}
			if st.ConnectionsOpen != 0 || st.ClosedOnClose != st.ConnectionsOpened {
				t.Errorf("stats: %+v, want the producer closed", st)
			}
		})
	}
}

// TestReleaseOnSIGUSR1: the channel closes on the process's first SIGUSR1.
func TestReleaseOnSIGUSR1(t *testing.T) {
	release, stop := releaseOnSIGUSR1()
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-release:
	case <-time.After(20 * time.Second):
		t.Fatal("SIGUSR1 did not close the channel")
	}
}

// waitLog waits, for at most 20 s, until buf holds s.
func waitLog(t *testing.T, buf *testio.SyncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(buf.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 20s:\n%s", s, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDurationBoundsTheFlush: `--messages 1 --duration 1s` against a
// port nothing listens on stops once --duration and the stop flush are
// over, not after delivery.timeout.ms (120 s) or max.block.ms (60 s); and a
// run that delivered nothing exits 1, saying so. The 40 s bound is far
// beyond the 4 s the run takes, and far below what it took before.
func TestDurationBoundsTheFlush(t *testing.T) {
	var errOut testio.SyncBuffer
	ios, _, out, _ := cmdutil.Test()
	ios.ErrOut = &errOut
	o := &ProduceOptions{IO: ios, Context: context.Background(), Bootstrap: "127.0.0.1:1", Topic: "t", Messages: 1,
		Interval: time.Second, Duration: time.Second, LogLevel: "info", StatsJSON: true}
	done := make(chan error, 1)
	go func() { done <- runProduce(o) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(40 * time.Second):
		t.Fatalf("--duration 1s: still running after 40s:\n%s", errOut.String())
	}
	if code := cmdutil.ExitCode(err); code != 1 || !strings.Contains(err.Error(), "no message delivered (1 failed, 0 not sent)") {
		t.Errorf("err = %v (exit %d), want exit 1: no message delivered", err, code)
	}
	var st statsJSON
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("stdout: %v\n%s", err, out)
	}
	if st.RecordsAcked != 0 || st.RecordsFailed != 1 {
		t.Errorf("stats: %+v, want 0 acked, 1 failed", st)
	}
}

// TestConfigDirectory: --config naming a directory says so and what to
// give instead, not "read DIR: is a directory".
func TestConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	ios, _, _, _ := cmdutil.Test()
	o := &ProduceOptions{IO: ios, ConfigFile: dir, Bootstrap: "127.0.0.1:1", Topic: "t", LogLevel: "info"}
	err := runProduce(o)
	want := "produce: " + dir + " is a directory: give the producer's .properties file"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if code := cmdutil.ExitCode(err); code != cmdutil.ExitUsage {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitUsage)
	}
}

// TestSummaryCountsTheBrokersCloses: connections the broker closed while
// nothing read them (the on-demand reader; a blocked callback) are in
// CLOSE_WAIT when Ctrl-C closes the producer; the summary counts them as
// closed by the broker, not by the client. The broker's idle close is
// driven (Cluster.CloseIdle) and the test waits for the CLOSE_WAIT it
// causes.
func TestSummaryCountsTheBrokersCloses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		reader string
		block  bool
	}{{"on-demand reader", "on-demand", false}, {"blocked callback", "poll", true}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := broker.Start(ctx, broker.Config{Brokers: 1, Ports: []int{0}, Topics: []string{"sum"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var errOut testio.SyncBuffer
			ios, _, out, _ := cmdutil.Test()
			ios.ErrOut = &errOut
			o := &ProduceOptions{IO: ios, Context: ctx, Bootstrap: c.BootstrapServers(), Topic: "sum",
				Interval: time.Hour, Reader: tt.reader, BlockCallbacks: tt.block, Release: make(chan struct{}),
				LogLevel: "info", StatsJSON: true, Set: []string{"linger.ms=0"}}
			done := make(chan error, 1)
			go func() { done <- runProduce(o) }()
			if tt.block {
				waitLog(t, &errOut, "message 0: callback blocking the network goroutine")
			} else {
				waitLog(t, &errOut, "message 0 delivered")
			}
			var closed int
			waitCond(t, "the broker closes the producer's idle connections", func() bool {
				closed += c.CloseIdle()
				return closed > 0 && c.Stats().Open == 0
			})
			waitCond(t, "every connection in CLOSE_WAIT", func() bool { return closeWait(t, c) == closed })
			cancel() // Ctrl-C
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("run did not stop")
			}
			var st statsJSON
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatalf("stdout: %v\n%s", err, out)
			}
			if st.PeerCloses != int64(closed) || st.ClosedByClient() != 0 {
				t.Errorf("stats: %d peer closes, %d closed by the client; the broker closed all %d", st.PeerCloses, st.ClosedByClient(), closed)
			}
			if want := fmt.Sprintf("0 closed by the client, %d by the broker", closed); !strings.Contains(errOut.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, errOut.String())
			}
		})
	}
}

// closeWait counts this process's sockets to c in CLOSE_WAIT.
func closeWait(t *testing.T, c *broker.Cluster) int {
	t.Helper()
	br, err := netstat.ParseBrokers(c.BootstrapServers())
	if err != nil {
		t.Fatal(err)
	}
	s, err := netstat.NewScanner("/proc").Scan(context.Background(), netstat.Query{PIDs: []int{os.Getpid()}, Brokers: br,
		States: netstat.States(netstat.CloseWait)})
	if err != nil {
		t.Fatal(err)
	}
	return len(s.Sockets)
}

// waitCond polls cond until it holds, for at most 20 s.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 20s waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNothingDeliveredFails: a run whose one message never reached a
// broker (nothing listens on port 1; it fails after max.block.ms) exits 1,
// not 0.
func TestNothingDeliveredFails(t *testing.T) {
	var errOut testio.SyncBuffer
	ios, _, _, _ := cmdutil.Test()
	ios.ErrOut = &errOut
	o := &ProduceOptions{IO: ios, Context: context.Background(), Bootstrap: "127.0.0.1:1", Topic: "t", Messages: 1, LogLevel: "info",
		Set: []string{"max.block.ms=100", "request.timeout.ms=100", "delivery.timeout.ms=200", "linger.ms=0"}}
	done := make(chan error, 1)
	go func() { done <- runProduce(o) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
	if code := cmdutil.ExitCode(err); code != 1 || !strings.Contains(err.Error(), "no message delivered") {
		t.Errorf("err = %v (exit %d), want exit 1: no message delivered\n%s", err, code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "0 acked, 1 failed") {
		t.Errorf("summary:\n%s", errOut.String())
	}
}
