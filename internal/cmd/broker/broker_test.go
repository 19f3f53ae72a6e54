package broker

import (
	"context"
	"net"
	"regexp"
	"strings"
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
			want: BrokerOptions{Brokers: 3, Listen: "127.0.0.1", Idle: 10 * time.Minute, LogLevel: "info"},
		},
		{
			name: "ports set the broker count",
			args: []string{"--ports", "19092, 19093", "--idle", "3s", "--topic", "a", "--topic", "b", "--partitions", "6", "--duration", "1m", "--log-level", "debug"},
			want: BrokerOptions{Brokers: 2, Ports: []int{19092, 19093}, Listen: "127.0.0.1", Idle: 3 * time.Second,
				Topics: []string{"a", "b"}, Partitions: 6, Duration: time.Minute, LogLevel: "debug"},
		},
		{name: "ports and brokers disagree", args: []string{"--brokers", "3", "--ports", "1,2"}, wantErr: "one port per broker"},
		{name: "bad port", args: []string{"--ports", "x"}, wantErr: `"x" is not a port number`},
		{name: "listen on a name", args: []string{"--listen", "localhost"}, wantErr: "not an IP address"},
		{name: "bad level", args: []string{"--log-level", "loud"}, wantErr: "want debug, info or warn"},
		{name: "no brokers", args: []string{"--brokers", "0"}, wantErr: "at least 1"},
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

func TestRunBrokerServesAndReports(t *testing.T) {
	out, errOut := &testio.SyncBuffer{}, &testio.SyncBuffer{}
	io := &cmdutil.IOStreams{Out: out, ErrOut: errOut}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runBroker(&BrokerOptions{IO: io, Context: ctx, Brokers: 1, Ports: []int{0}, Listen: "127.0.0.1", Idle: 200 * time.Millisecond, LogLevel: "info"})
	}()

	// The port is free-chosen: learn it from the "broker listening" log.
	re := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	var addr string
	deadline := time.Now().Add(10 * time.Second)
	for addr == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if m := re.FindStringSubmatch(errOut.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		cancel()
		t.Fatalf("broker did not start; stderr:\n%s", errOut.String())
	}
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
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"bootstrap.servers=" + addr, "closes connections idle for 200ms", "CLOSED IDLE (BY BROKER)"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("stdout lacks %q:\n%s", s, out)
		}
	}
	if !strings.Contains(errOut.String(), "reason=idle") {
		t.Errorf("stderr lacks the idle close:\n%s", errOut)
	}
}
