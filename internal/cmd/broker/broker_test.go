package broker

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/testio"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    BrokerOptions
		wantErr string
	}{
		{
			name: "defaults",
			want: BrokerOptions{Brokers: 3, Listen: "127.0.0.1", Idle: 10 * time.Minute, LogLevel: "info", MaxRequestBytes: 104857600,
				MaxQueuedRequestBytes: 32 << 20, RetentionBytes: 64 << 20},
		},
		{
			name: "ports set the broker count",
			args: []string{"--ports", "19092, 19093", "--idle", "3s", "--topic", "a", "--topic", "b", "--partitions", "6", "--duration", "1m", "--log-level", "debug", "--max-request-bytes", "1048576",
				"--max-queued-request-bytes", "4194304", "--retention-bytes", "-1"},
			want: BrokerOptions{Brokers: 2, Ports: []int{19092, 19093}, Listen: "127.0.0.1", Idle: 3 * time.Second,
				Topics: []string{"a", "b"}, Partitions: 6, Duration: time.Minute, LogLevel: "debug", MaxRequestBytes: 1 << 20,
				MaxQueuedRequestBytes: 4 << 20, RetentionBytes: -1},
		},
		{name: "ports and brokers disagree", args: []string{"--brokers", "3", "--ports", "1,2"}, wantErr: "one port per broker"},
		{name: "bad port", args: []string{"--ports", "x"}, wantErr: `"x" is not a port number`},
		{name: "listen on a name", args: []string{"--listen", "localhost"}, wantErr: "not an IP address"},
		{name: "bad level", args: []string{"--log-level", "loud"}, wantErr: "want debug, info or warn"},
		{name: "no brokers", args: []string{"--brokers", "0"}, wantErr: "at least 1"},
		{name: "max request bytes 0", args: []string{"--max-request-bytes", "0"}, wantErr: "--max-request-bytes: 0 is out of range: give 1 to 2147483647 bytes"},
		{name: "max request bytes over an int32", args: []string{"--max-request-bytes", "2147483648"}, wantErr: "out of range"},
		{name: "no room for requests", args: []string{"--max-queued-request-bytes", "0"}, wantErr: "--max-queued-request-bytes: 0 is out of range: give a number of bytes, at least 1"},
		{name: "retention 0", args: []string{"--retention-bytes", "0"}, wantErr: "--retention-bytes: 0 is out of range: give a number of bytes, or -1 to keep every record"},
		{name: "retention below -1", args: []string{"--retention-bytes", "-2"}, wantErr: "--retention-bytes: -2 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, _, _, _ := cmdutil.Test()
			var got *BrokerOptions
			cmd := NewCmdBroker(&cmdutil.Factory{IO: io}, func(o *BrokerOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Out)
			cmd.SetErr(io.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
					t.Errorf("exit code %d, want %d", cmdutil.ExitCode(err), cmdutil.ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO, got.Context = nil, nil
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// startRun runs runBroker with opts in the background on a free port and
// returns the broker's address once its log names it, and a stop that
// cancels the run and returns its error.
func startRun(t *testing.T, opts BrokerOptions) (addr string, out, errOut *testio.SyncBuffer, stop func() error) {
	t.Helper()
	out, errOut = &testio.SyncBuffer{}, &testio.SyncBuffer{}
	opts.IO = &cmdutil.IOStreams{Out: out, ErrOut: errOut}
	ctx, cancel := context.WithCancel(context.Background())
	opts.Context = ctx
	done := make(chan error, 1)
	go func() { done <- runBroker(&opts) }()
	stop = func() error { cancel(); return <-done }

	// The port is free-chosen: learn it from the "broker listening" log.
	re := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	deadline := time.Now().Add(10 * time.Second)
	for addr == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if m := re.FindStringSubmatch(errOut.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		_ = stop()
		t.Fatalf("broker did not start; stderr:\n%s", errOut.String())
	}
	return addr, out, errOut, stop
}

func TestRunBrokerServesAndReports(t *testing.T) {
	// The bounds left at 0: the broker's defaults, which the banner gives.
	addr, out, errOut, stop := startRun(t, BrokerOptions{Brokers: 1, Ports: []int{0}, Listen: "127.0.0.1", Idle: 200 * time.Millisecond, LogLevel: "info", MaxRequestBytes: 1 << 20})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// The broker closes the idle connection: the read returns.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, rerr := conn.Read(make([]byte, 1))
	conn.Close()
	if rerr == nil {
		t.Fatal("read returned data, want the broker's close")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"bootstrap.servers=" + addr, "closes connections idle for 200ms", "CLOSED IDLE (BY BROKER)",
		"It keeps the last 64 MiB of each partition and holds at most 32 MiB of requests at once."} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("stdout lacks %q:\n%s", s, out)
		}
	}
	if !strings.Contains(errOut.String(), "reason=idle") {
		t.Errorf("stderr lacks the idle close:\n%s", errOut)
	}
}

func TestRunBrokerRefusesOversizedRequest(t *testing.T) {
	addr, out, errOut, stop := startRun(t, BrokerOptions{Brokers: 1, Ports: []int{0}, Listen: "127.0.0.1", LogLevel: "info", MaxRequestBytes: 1024,
		MaxQueuedRequestBytes: 32 << 20, RetentionBytes: 64 << 20})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A frame that announces 2048 bytes: refused on its size alone.
	if _, err := conn.Write([]byte{0, 0, 8, 0}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want the broker's close", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"level=WARN", `reason="invalid request"`, `error="invalid receive: size 2048 larger than socket.request.max.bytes 1024"`} {
		if !strings.Contains(errOut.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, errOut)
		}
	}
	// The table counts it: ACCEPTED 1, CLOSED INVALID REQUEST 1.
	var totals []string
	for _, line := range strings.Split(out.String(), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "│"), "│")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "all" {
			totals = cells
		}
	}
	want := []string{"all", "", "1", "0", "0", "1", "0", "0"}
	if diff := cmp.Diff(want, totals); diff != "" {
		t.Errorf("totals row (-want +got):\n%s\nstdout:\n%s", diff, out)
	}
}

// TestRunBrokerBoundsQueuedRequests: --max-queued-request-bytes reaches the
// broker, and a frame larger than it is refused with a line naming the flag.
func TestRunBrokerBoundsQueuedRequests(t *testing.T) {
	addr, out, errOut, stop := startRun(t, BrokerOptions{Brokers: 1, Ports: []int{0}, Listen: "127.0.0.1", LogLevel: "info", MaxRequestBytes: 1 << 20,
		MaxQueuedRequestBytes: 1024, RetentionBytes: -1})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A Produce (key 0) v9 frame that announces 2048 bytes.
	if _, err := conn.Write([]byte{0, 0, 8, 0, 0, 0, 0, 9}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want the broker's close", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	const refused = `error="invalid receive: size 2048 larger than the broker's bound on queued request bytes 1024 (--max-queued-request-bytes, Kafka's queued.max.request.bytes)"`
	if !strings.Contains(errOut.String(), refused) {
		t.Errorf("stderr lacks %s:\n%s", refused, errOut)
	}
	if want := "It keeps every record and holds at most 1024 bytes of requests at once."; !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
}
