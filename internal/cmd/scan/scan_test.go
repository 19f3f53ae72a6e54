package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/netstat"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	sockettest.MaybeRunChild()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var fixedNow = time.Date(2026, 12, 2, 15, 4, 5, 0, time.UTC)

func factory() (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	io, _, out, errOut := cmdutil.Test()
	return &cmdutil.Factory{IO: io, Now: func() time.Time { return fixedNow }, ProcRoot: "/proc"}, out, errOut
}

func TestFlags(t *testing.T) {
	var got *ScanOptions
	runF := func(o *ScanOptions) error { got = o; return nil }
	f, _, _ := factory()
	cmd := NewCmdScan(f, runF)
	cmd.SetArgs([]string{"--state", "close-wait,established", "--pid", "10,20", "--pid", "30", "--process", "^java$",
		"--port", "9092", "--port", "9093", "--remote", "127.0.0.1:9092", "--remote", "[::1]", "--brokers", "127.0.0.1:9092,127.0.0.2",
		"--source", "proc", "-o", "wide", "--warn", "10", "--crit", "100"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	q := got.Query
	if q.States != netstat.States(netstat.CloseWait, netstat.Established) {
		t.Errorf("states %b", q.States)
	}
	if d := cmp.Diff([]int{10, 20, 30}, q.PIDs); d != "" {
		t.Errorf("pids (-want +got):\n%s", d)
	}
	if q.Process == nil || !q.Process.MatchString("java") || q.Process.MatchString("javac") {
		t.Errorf("process regexp %v", q.Process)
	}
	if d := cmp.Diff([]uint16{9092, 9093}, q.RemotePorts); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	var remotes, brokers []string
	for _, e := range q.Remotes {
		remotes = append(remotes, e.String())
	}
	for _, e := range q.Brokers {
		brokers = append(brokers, e.String())
	}
	if d := cmp.Diff([]string{"127.0.0.1:9092", "::1"}, remotes); d != "" {
		t.Errorf("remotes (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"127.0.0.1:9092", "127.0.0.2:9092"}, brokers); d != "" {
		t.Errorf("brokers (-want +got):\n%s", d)
	}
	if got.Source != "proc" || got.Output != "wide" || got.Warn != 10 || got.Crit != 100 || got.ProcRoot != "/proc" {
		t.Errorf("options %+v", got)
	}
}

func TestFlagDefaults(t *testing.T) {
	var got *ScanOptions
	f, _, _ := factory()
	cmd := NewCmdScan(f, func(o *ScanOptions) error { got = o; return nil })
	cmd.SetArgs([]string{})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Query.States != netstat.AllStates || got.Output != "table" || got.Source != "auto" || got.monitoring() {
		t.Errorf("defaults: %+v", got)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--state", "closewaiting"},
		{"-o", "yaml"},
		{"--port", "0"},
		{"--port", "70000"},
		{"--pid", "-1"},
		{"--process", "("},
		{"--remote", "host:port"},
		{"--brokers", ","},
		{"--source", "ebpf"},
		{"--warn", "100", "--crit", "10"},
		{"extra-arg"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f, _, _ := factory()
			cmd := NewCmdScan(f, func(*ScanOptions) error { t.Error("ran with bad flags"); return nil })
			cmd.SetArgs(args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if err == nil {
				t.Fatal("no error")
			}
			if a := args[0]; a != "extra-arg" && cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("exit code %d (%v), want %d", cmdutil.ExitCode(err), err, cmdutil.ExitUsage)
			}
		})
	}
}

func TestHelpListsFormats(t *testing.T) {
	f, out, _ := factory()
	cmd := NewCmdScan(f, nil)
	cmd.SetOut(out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "json|table|wide") || !strings.Contains(out.String(), "Examples:") {
		t.Errorf("help lacks the formats or examples:\n%s", out)
	}
}

// fixedSnapshot is a snapshot as a scan of a Kafka producer host would give,
// fixed for golden output.
func fixedSnapshot() *netstat.Snapshot {
	ap := netip.MustParseAddrPort
	sock := func(st netstat.State, local, remote string, rq uint32, pid, fd int, age time.Duration, ns uint64) netstat.Socket {
		s := netstat.Socket{Family: netstat.IPv4, State: st, Local: ap(local), Remote: ap(remote), RecvQ: rq,
			Inode: uint64(100000 + fd + pid), PID: pid, FD: fd, NetNS: ns}
		if strings.Contains(local, "[") {
			s.Family = netstat.IPv6
		}
		if pid == 0 {
			s.FD = -1
			if st == netstat.TimeWait {
				s.Inode = 0
			}
		}
		if age > 0 {
			s.Age, s.HasAge = age, true
		}
		return s
	}
	const host, pod = 4026531840, 4026532201
	return &netstat.Snapshot{
		Time:   fixedNow,
		Source: "netlink",
		Sockets: []netstat.Socket{
			sock(netstat.Established, "10.0.0.5:40100", "10.0.0.21:9092", 0, 4242, 101, 2*time.Second, host),
			sock(netstat.Established, "10.0.1.7:51000", "10.0.0.22:9092", 0, 777, 12, time.Second, pod),
			sock(netstat.TimeWait, "10.0.0.5:40050", "10.0.0.21:9092", 0, 0, -1, 0, host),
			sock(netstat.CloseWait, "10.0.0.5:40001", "10.0.0.21:9092", 1, 4242, 57, 3*time.Minute+12*time.Second, host),
			sock(netstat.CloseWait, "10.0.0.5:40002", "10.0.0.21:9092", 1, 4242, 58, 2*time.Minute, host),
			// Keepalive answered after the FIN: between 95 s and 4m10s.
			func() netstat.Socket {
				s := sock(netstat.CloseWait, "10.0.0.5:40003", "10.0.0.22:9092", 0, 4242, 59, 95*time.Second, host)
				s.AgeSpan = 155000
				return s
			}(),
			sock(netstat.CloseWait, "10.0.1.7:51001", "10.0.0.23:9093", 7, 777, 13, 42*time.Second, pod),
			sock(netstat.CloseWait, "10.0.0.5:40004", "10.0.0.23:9093", 1, 0, -1, 0, host),
			sock(netstat.Listen, "0.0.0.0:8080", "0.0.0.0:0", 0, 4242, 9, 0, host),
			// Held CLOSE: reset out of the kernel's tables, fd still held.
			{Family: netstat.IPv4, State: netstat.Close, Inode: 104300, PID: 4242, FD: 60, NetNS: host},
			// Held CLOSE kept for its process by a remote filter.
			{Family: netstat.IPv4, State: netstat.Close, Inode: 104301, PID: 4242, FD: 61, NetNS: host, KeptByProcess: true},
		},
		Processes: []netstat.Process{
			{PID: 777, Name: "producer", Cmdline: "./producer -brokers kafka:9092", User: "app", UID: 1000, NetNS: pod,
				Container: "3f4e5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081",
				Kafka:     "maps librdkafka (librdkafka.so.1)", States: map[string]int{"ESTABLISHED": 1, "CLOSE_WAIT": 1}},
			{PID: 4242, Name: "java", Cmdline: "java -cp /app/lib/kafka-clients-3.7.0.jar:/app/app.jar App", User: "kafka", UID: 998, NetNS: host,
				Kafka: "kafka-clients on class path (kafka-clients-3.7.0.jar)", States: map[string]int{"ESTABLISHED": 1, "CLOSE_WAIT": 3, "LISTEN": 1, "CLOSE": 2}},
		},
		Notes: []string{"1 socket unattributed: the fds of pid 31337 (cron) could not be read (permission denied; run as root, or give kdiag CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, to see them)"},
		Unseen: &netstat.Unseen{Sockets: map[string]int{"CLOSE_WAIT": 1},
			Reason: "the fds of pid 31337 (cron) could not be read (permission denied; run as root, or give kdiag CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, to see them)", PIDs: []int{31337}},
	}
}

func fixedOptions(f *cmdutil.Factory, output string, warn, crit int) *ScanOptions {
	return &ScanOptions{IO: f.IO, Now: f.Now, Output: output, Warn: warn, Crit: crit, HostNetNS: 4026531840,
		Scan: func(context.Context, netstat.Query) (*netstat.Snapshot, error) { return fixedSnapshot(), nil }}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s (-want +got):\n%s", path, d)
	}
}

func TestGolden(t *testing.T) {
	for _, format := range []string{"table", "wide", "json"} {
		t.Run(format, func(t *testing.T) {
			f, out, errOut := factory()
			if err := runScan(fixedOptions(f, format, -1, -1)); err != nil {
				t.Fatal(err)
			}
			golden(t, "scan_"+format, out.Bytes())
			if want := "kdiag: note: 1 socket unattributed"; strings.Count(errOut.String(), want) != 1 {
				t.Errorf("stderr %q: want the note once", errOut)
			}
		})
	}
}

// TestTableIgnoresSocketOrder checks that the table, which a one-shot scan
// renders from unsorted sockets (Scanner.Unordered), says the same of the
// sockets in any order: its golden file holds for every order.
func TestTableIgnoresSocketOrder(t *testing.T) {
	var want bytes.Buffer
	if err := writeTable(&want, fixedSnapshot(), view{hostNS: 4026531840, now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		snap := fixedSnapshot()
		r.Shuffle(len(snap.Sockets), func(a, b int) { snap.Sockets[a], snap.Sockets[b] = snap.Sockets[b], snap.Sockets[a] })
		var got bytes.Buffer
		if err := writeTable(&got, snap, view{hostNS: 4026531840, now: fixedNow}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.String(), got.String()); d != "" {
			t.Fatalf("order %d (-sorted +shuffled):\n%s", i, d)
		}
	}
}

// TestJSONStreamMatchesSnapshot checks that the streamed JSON decodes to the
// snapshot, so it stays netstat.Snapshot's schema.
func TestJSONStreamMatchesSnapshot(t *testing.T) {
	var buf bytes.Buffer
	snap := fixedSnapshot()
	if err := writeJSON(&buf, snap, view{}); err != nil {
		t.Fatal(err)
	}
	var got netstat.Snapshot
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, buf.String())
	}
	if d := cmp.Diff(snap, &got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("decoded snapshot (-want +got):\n%s", d)
	}
	want, _ := json.Marshal(snap)
	var a, b any
	json.Unmarshal(want, &a)
	json.Unmarshal(buf.Bytes(), &b)
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("streamed JSON differs from json.Marshal(snapshot) (-marshal +stream):\n%s", d)
	}
}

// TestAppendSocketJSON compares the hand-written socket encoder with
// netstat.Socket.MarshalJSON byte for byte.
func TestAppendSocketJSON(t *testing.T) {
	socks := append(fixedSnapshot().Sockets,
		netstat.Socket{Family: netstat.IPv6, State: netstat.SynSent, Local: netip.MustParseAddrPort("[::1]:1"),
			Remote: netip.MustParseAddrPort("[2001:db8::5]:65535"), RecvQ: 1<<32 - 1, SendQ: 7, Inode: 1<<64 - 1, UID: 65534,
			NetNS: 4026532201, PID: 1<<22 - 1, FD: 1 << 20, Age: -time.Millisecond, HasAge: true},
		netstat.Socket{Family: netstat.IPv6, State: netstat.Established, Local: netip.MustParseAddrPort(`[fe80::1%eth"0]:9092`),
			Remote: netip.MustParseAddrPort("[fe80::2%eth0]:1")},
		netstat.Socket{State: netstat.State(99)})
	for _, s := range socks {
		want, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendSocketJSON(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendSocketJSON\n got %s\nwant %s", got, want)
		}
	}
}

func TestMonitoring(t *testing.T) {
	tests := []struct {
		name       string
		warn, crit int
		code       int
		line       string
	}{
		// java holds 3 CLOSE_WAIT and 2 held CLOSE (one kept for its
		// process by a remote filter: counted all the same): 5 leaked.
		{"ok", 6, 10, cmdutil.ExitOK, "KDIAG OK - 3 CLOSE_WAIT and 2 held CLOSE in pid 4242 (java), oldest 3m12s-4m10s; 1 CLOSE_WAIT unattributed | close_wait=5;6;10 close_wait_total=7"},
		{"warning", 2, 10, cmdutil.ExitWarning, "KDIAG WARNING - 3 CLOSE_WAIT and 2 held CLOSE in pid 4242 (java), oldest 3m12s-4m10s; 1 CLOSE_WAIT unattributed | close_wait=5;2;10 close_wait_total=7"},
		{"critical", 1, 2, cmdutil.ExitCritical, "KDIAG CRITICAL - 3 CLOSE_WAIT and 2 held CLOSE in pid 4242 (java), oldest 3m12s-4m10s; 1 CLOSE_WAIT unattributed | close_wait=5;1;2 close_wait_total=7"},
		{"at the threshold is not above it", 6, -1, cmdutil.ExitOK, "KDIAG OK - 3 CLOSE_WAIT and 2 held CLOSE in pid 4242 (java), oldest 3m12s-4m10s; 1 CLOSE_WAIT unattributed | close_wait=5;6; close_wait_total=7"},
		// The unattributed socket, were it java's, would make it 6: above 5.
		{"what was not seen could cross warn", 5, 10, cmdutil.ExitUnknown, "KDIAG UNKNOWN - 1 CLOSE_WAIT unattributed, enough to make it WARNING: the fds of pid 31337 (cron) could not be read (permission denied; run as root, or give kdiag CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, to see them) | close_wait=5;5;10 close_wait_total=7"},
		{"what was not seen could cross crit", 1, 5, cmdutil.ExitUnknown, "KDIAG UNKNOWN - 1 CLOSE_WAIT unattributed, enough to make it CRITICAL: the fds of pid 31337 (cron) could not be read (permission denied; run as root, or give kdiag CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, to see them) | close_wait=5;1;5 close_wait_total=7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, _ := factory()
			err := runScan(fixedOptions(f, "table", tt.warn, tt.crit))
			if got := cmdutil.ExitCode(err); got != tt.code {
				t.Errorf("exit code %d, want %d", got, tt.code)
			}
			first, rest, _ := strings.Cut(out.String(), "\n")
			if first != tt.line {
				t.Errorf("summary\n got %q\nwant %q", first, tt.line)
			}
			if !strings.HasPrefix(rest, "PID") {
				t.Errorf("the table does not follow the summary:\n%s", out)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		f, out, _ := factory()
		o := fixedOptions(f, "table", 1, 2)
		o.Scan = func(context.Context, netstat.Query) (*netstat.Snapshot, error) {
			return nil, errors.New("list processes: open /proc: permission denied")
		}
		err := runScan(o)
		if got := cmdutil.ExitCode(err); got != cmdutil.ExitUnknown {
			t.Errorf("exit code %d, want %d", got, cmdutil.ExitUnknown)
		}
		if want := "KDIAG UNKNOWN - scan failed: list processes: open /proc: permission denied\n"; out.String() != want {
			t.Errorf("output %q, want %q", out, want)
		}
	})
	t.Run("json keeps stdout JSON", func(t *testing.T) {
		f, out, errOut := factory()
		err := runScan(fixedOptions(f, "json", 1, 2))
		if cmdutil.ExitCode(err) != cmdutil.ExitCritical {
			t.Errorf("exit code %d", cmdutil.ExitCode(err))
		}
		if !json.Valid(out.Bytes()) || !strings.HasPrefix(errOut.String(), "KDIAG CRITICAL") {
			t.Errorf("stdout JSON %v, stderr %q", json.Valid(out.Bytes()), errOut)
		}
	})
}

// TestScanJSONRealSockets runs the command on real sockets, in this process
// and in a child, and decodes its JSON.
func TestScanJSONRealSockets(t *testing.T) {
	cw := sockettest.CloseWait(t, "tcp4", 2, sockettest.PeerData(3))
	cw = append(cw, sockettest.CloseWait(t, "tcp6", 1)...)
	child := sockettest.StartChild(t, sockettest.Spec{Network: "tcp4", CloseWait: 2, Listeners: 1})
	want := append(cw, child.CloseWait...)
	for _, src := range []string{"proc", "netlink"} {
		t.Run(src, func(t *testing.T) {
			f, out, errOut := factory()
			cmd := NewCmdScan(f, nil)
			cmd.SetArgs([]string{"--state", "close-wait", "--pid", strconv.Itoa(os.Getpid()) + "," + strconv.Itoa(child.PID), "--source", src, "-o", "json"})
			if err := cmd.Execute(); err != nil {
				if src == "netlink" && strings.Contains(err.Error(), "netlink") {
					t.Skipf("netlink unavailable: %v", err)
				}
				t.Fatalf("%v; stderr %s", err, errOut)
			}
			// Decode as plain maps: the field names are the contract.
			var doc struct {
				Sockets   []map[string]any `json:"sockets"`
				Processes []map[string]any `json:"processes"`
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			type sk struct {
				State, Local, Remote string
				RecvQ, Inode, PID    float64
				FD                   float64
			}
			got := map[string]sk{}
			for _, s := range doc.Sockets {
				for _, k := range []string{"state", "local", "remote", "recv_q", "send_q", "inode", "pid", "fd", "age_ms"} {
					if _, ok := s[k]; !ok {
						t.Fatalf("socket %v has no %q", s, k)
					}
				}
				x := sk{s["state"].(string), s["local"].(string), s["remote"].(string), s["recv_q"].(float64), s["inode"].(float64), s["pid"].(float64), s["fd"].(float64)}
				got[x.Local+"->"+x.Remote] = x
				if src == "netlink" && s["age_ms"] == nil {
					t.Errorf("netlink socket without age_ms: %v", s)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d sockets reported, want exactly %d", len(got), len(want))
			}
			for _, w := range want {
				x := sk{"CLOSE_WAIT", w.Local.String(), w.Remote.String(), float64(w.RecvQ), float64(w.Inode), float64(w.PID), float64(w.FD)}
				if d := cmp.Diff(x, got[x.Local+"->"+x.Remote]); d != "" {
					t.Errorf("%s (-want +got):\n%s", w, d)
				}
			}
			pids := map[float64]map[string]any{}
			for _, p := range doc.Processes {
				for _, k := range []string{"pid", "name", "cmdline", "user", "netns", "states"} {
					if _, ok := p[k]; !ok {
						t.Fatalf("process %v has no %q", p, k)
					}
				}
				pids[p["pid"].(float64)] = p
			}
			if p := pids[float64(child.PID)]; p == nil || p["states"].(map[string]any)["CLOSE_WAIT"] != float64(2) {
				t.Errorf("child process %v, want 2 CLOSE_WAIT", p)
			}
			if p := pids[float64(os.Getpid())]; p == nil || p["states"].(map[string]any)["CLOSE_WAIT"] != float64(3) {
				t.Errorf("own process %v, want 3 CLOSE_WAIT", p)
			}
		})
	}
}

// TestScanFixtureProcRoot drives the whole command from a fixture /proc tree
// (the hidden --proc-root): /proc/net/tcp lines, fd symlinks, and the files
// gopsutil reads for the process.
func TestScanFixtureProcRoot(t *testing.T) {
	root := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	write("net/tcp", header+
		"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5001 1 0000000000000000 100 0 0 10 0\n"+
		"   1: 0100007F:9C40 0200007F:2384 08 00000000:00000001 00:00000000 00000000  1000        0 5002 1 0000000000000000 20 4 30 10 -1\n"+
		"   2: 0100007F:9C41 0200007F:2384 08 00000000:00000000 00:00000000 00000000  1000        0 5003 1 0000000000000000 20 4 30 10 -1\n"+
		"   3: 0100007F:9C42 0200007F:2384 06 00000000:00000000 03:00000F00 00000000     0        0 0 3 0000000000000000\n")
	write("net/tcp6", "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
	write("stat", "cpu  1 2 3 4 5 6 7 0 0 0\nbtime 1764680000\n")
	write("100/comm", "java\n")
	write("100/cmdline", "java\x00-cp\x00/app/lib/kafka-clients-3.7.0.jar:/app/app.jar\x00App\x00")
	write("100/status", "Name:\tjava\nState:\tS (sleeping)\nTgid:\t100\nPid:\t100\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n")
	write("100/stat", "100 (java) S 1 100 100 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 30 0 12345 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	write("100/ns/net", "")
	if err := os.MkdirAll(filepath.Join(root, "self", "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The same file, so the same inode: kdiag and pid 100 share a namespace.
	if err := os.Link(filepath.Join(root, "100/ns/net"), filepath.Join(root, "self/ns/net")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "100/fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	for fd, target := range map[string]string{"0": "/dev/null", "3": "socket:[5001]", "4": "socket:[5002]"} {
		if err := os.Symlink(target, filepath.Join(root, "100/fd", fd)); err != nil {
			t.Fatal(err)
		}
	}

	// pid 200 holds the second CLOSE_WAIT, but is a zombie by the time its
	// details are read: nothing but its stat is left, and its fds closed
	// with it.
	write("200/stat", "200 (producer) Z 1 200 200 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 30 0 12345 0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	if err := os.Link(filepath.Join(root, "100/ns/net"), filepath.Join(root, "200/ns/net")); err != nil {
		if err := os.MkdirAll(filepath.Join(root, "200/ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(root, "100/ns/net"), filepath.Join(root, "200/ns/net")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "200/fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[5003]", filepath.Join(root, "200/fd/5")); err != nil {
		t.Fatal(err)
	}

	f, out, errOut := factory()
	f.ProcRoot = root
	cmd := NewCmdScan(f, nil)
	cmd.SetArgs([]string{"-o", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v; stderr %s", err, errOut)
	}
	var snap netstat.Snapshot
	if err := json.Unmarshal(out.Bytes(), &snap); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	type row struct {
		State         string
		Local, Remote string
		RecvQ         uint32
		PID, FD       int
	}
	var got []row
	for _, s := range snap.Sockets {
		got = append(got, row{s.State.String(), s.Local.String(), s.Remote.String(), s.RecvQ, s.PID, s.FD})
	}
	want := []row{
		{"TIME_WAIT", "127.0.0.1:40002", "127.0.0.2:9092", 0, 0, -1},
		{"CLOSE_WAIT", "127.0.0.1:40000", "127.0.0.2:9092", 1, 100, 4},
		{"CLOSE_WAIT", "127.0.0.1:40001", "127.0.0.2:9092", 0, 0, -1},
		{"LISTEN", "127.0.0.1:8080", "0.0.0.0:0", 0, 100, 3},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sockets (-want +got):\n%s", d)
	}
	if snap.Source != "proc" {
		t.Errorf("source %q, want proc (a fixture tree has no kernel behind it)", snap.Source)
	}
	if len(snap.Processes) != 1 {
		t.Fatalf("processes %+v, want pid 100 only (pid 200 exited)", snap.Processes)
	}
	if want := "kdiag: note: pid 200 exited before its details were read; 1 socket is left unattributed"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	p := snap.Processes[0]
	if p.PID != 100 || p.Name != "java" || p.UID != 1000 || !strings.HasPrefix(p.Kafka, "kafka-clients on class path") ||
		p.States["CLOSE_WAIT"] != 1 || p.States["LISTEN"] != 1 || p.Cmdline != "java -cp /app/lib/kafka-clients-3.7.0.jar:/app/app.jar App" {
		t.Errorf("process %+v", p)
	}
}

// TestTopRemotes checks the table's TOP REMOTES: busiest first, ties in
// address order, listeners and port-0 remotes left out, the rest counted.
func TestTopRemotes(t *testing.T) {
	ap := netip.MustParseAddrPort
	var socks []netstat.Socket
	add := func(n int, st netstat.State, remote string) {
		for range n {
			socks = append(socks, netstat.Socket{State: st, PID: 9, Remote: ap(remote)})
		}
	}
	add(1, netstat.Established, "10.0.0.3:9092")
	add(1, netstat.Established, "10.0.0.22:9092")
	add(4, netstat.CloseWait, "[2001:db8::1]:9093")
	add(2, netstat.Established, "10.0.0.9:9094")
	add(1, netstat.Established, "10.0.0.10:9092")
	add(5, netstat.Listen, "0.0.0.0:0")
	tl := tally(socks).of(9)
	if got, want := tl.topRemotes(), "[2001:db8::1]:9093 (4), 10.0.0.9:9094 (2), 10.0.0.3:9092 (1), +2 more"; got != want {
		t.Errorf("top remotes %q, want %q", got, want)
	}
	if tl.n != 14 || tl.states[netstat.Listen] != 5 {
		t.Errorf("tally n=%d listen=%d, want 14 and 5", tl.n, tl.states[netstat.Listen])
	}
	if got := tally(nil).of(9).topRemotes(); got != "" {
		t.Errorf("no sockets: top remotes %q", got)
	}
}

// TestScanMissingPID: a --pid that names no process is UNKNOWN (exit 3),
// said once, as the check's line with --warn/--crit and on stderr without;
// the processes that are there are still listed.
func TestScanMissingPID(t *testing.T) {
	const gone = 1 << 30 // above any pid_max
	cw := sockettest.CloseWait(t, "tcp4", 1)
	port := strconv.Itoa(int(cw[0].Remote.Port()))
	for _, tc := range []struct {
		name string
		args []string
		// wantOut: the first line of stdout (a prefix); wantErr: stderr.
		wantOut, wantErr string
	}{
		{"check", []string{"--pid", strconv.Itoa(gone), "--warn", "1", "--crit", "2"},
			"KDIAG UNKNOWN - --pid 1073741824 names no process (no /proc/1073741824) | close_wait=0;1;2 close_wait_total=0", ""},
		{"check, one there and one not", []string{"--pid", strconv.Itoa(gone) + "," + strconv.Itoa(os.Getpid()), "--port", port, "--warn", "0", "--crit", "2"},
			"KDIAG UNKNOWN - --pid 1073741824 names no process (no /proc/1073741824) | close_wait=1;0;2 close_wait_total=1", ""},
		{"table", []string{"--pid", strconv.Itoa(gone) + "," + strconv.Itoa(os.Getpid()), "--port", port},
			"PID ", "--pid 1073741824 names no process (no /proc/1073741824)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, out, errOut := factory()
			f.Now = time.Now
			cmd := NewCmdScan(f, nil)
			cmd.SetArgs(append(tc.args, "--state", "close-wait"))
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			err := cmd.Execute()
			if got := cmdutil.ExitCode(err); got != cmdutil.ExitUnknown {
				t.Errorf("exit code %d (%v), want %d", got, err, cmdutil.ExitUnknown)
			}
			first, _, _ := strings.Cut(out.String(), "\n")
			if !strings.HasPrefix(first, tc.wantOut) {
				t.Errorf("first line %q, want %q", first, tc.wantOut)
			}
			// What main prints of the error, then the notes.
			said := errOut.String()
			if err != nil && !isSilentErr(err) {
				said += err.Error() + "\n"
			}
			if n := strings.Count(out.String()+said, "names no process"); n != 1 {
				t.Errorf("said %d times, want once:\nstdout %s\nstderr %s", n, out, said)
			}
			if tc.wantErr != "" && !strings.Contains(said, tc.wantErr) {
				t.Errorf("stderr %q, want %q", said, tc.wantErr)
			}
			if strings.Contains(tc.args[1], ",") && !strings.Contains(out.String(), strconv.Itoa(os.Getpid())) {
				t.Errorf("the process that is there is not listed:\n%s", out)
			}
		})
	}
}

// isSilentErr: an ExitError without a message (main prints nothing).
func isSilentErr(err error) bool {
	var ee *cmdutil.ExitError
	return errors.As(err, &ee) && ee.Err == nil
}

// TestDetailsOnlyVerbose: a snapshot's details (sockets closed while the
// scan ran) go to stderr only with -v; its notes always, once.
func TestDetailsOnlyVerbose(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		f, _, errOut := factory()
		o := fixedOptions(f, "table", -1, -1)
		o.Verbose = verbose
		o.Scan = func(context.Context, netstat.Query) (*netstat.Snapshot, error) {
			s := fixedSnapshot()
			s.Details = []string{"3 sockets closed while the scan ran: left out"}
			return s, nil
		}
		if err := runScan(o); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(errOut.String(), "kdiag: note: 3 sockets closed while the scan ran: left out\n"); got != map[bool]int{false: 0, true: 1}[verbose] {
			t.Errorf("-v %v: the detail said %d times:\n%s", verbose, got, errOut)
		}
		if got := strings.Count(errOut.String(), "kdiag: note: 1 socket unattributed"); got != 1 {
			t.Errorf("-v %v: the note said %d times, want once:\n%s", verbose, got, errOut)
		}
	}
}
