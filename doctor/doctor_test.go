package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/fds"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/procconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// fake is a deterministic source: three processes on a clock that the
// sleeps advance.
type fake struct {
	now time.Time
}

func sock(state netstat.State, pid int, lport uint16, remote string, inode uint64) netstat.Socket {
	return netstat.Socket{Family: netstat.IPv4, State: state, PID: pid, Inode: inode, RecvQ: map[bool]uint32{true: 1}[state == netstat.CloseWait],
		Local: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), lport), Remote: netip.MustParseAddrPort(remote)}
}

func (f *fake) scan(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error) {
	s := &netstat.Snapshot{Time: f.now, Source: "netlink"}
	s.Processes = []netstat.Process{
		{PID: 100, Name: "orders", Cmdline: "/srv/orders --sasl.password=hunter2", User: "app", Kafka: "sockets to brokers (4 to ports 9092-9094)", StartTime: t0.Add(-time.Hour)},
		{PID: 200, Name: "java", Cmdline: "java -Djavax.net.ssl.keyStorePassword=changeit -cp /opt/app/kafka-clients-3.9.0.jar com.example.Billing", User: "app",
			Kafka: "kafka-clients on class path (kafka-clients-3.9.0.jar)", StartTime: t0.Add(-time.Hour)},
		{PID: 300, Name: "python3", Cmdline: "python3 /opt/tool/sync.py", User: "app", Kafka: "sockets to brokers (1 to ports 9092-9094)", StartTime: t0.Add(-time.Hour)},
	}
	s.Sockets = []netstat.Socket{
		sock(netstat.CloseWait, 100, 40001, "10.0.0.1:9092", 11), sock(netstat.CloseWait, 100, 40002, "10.0.0.2:9092", 12),
		sock(netstat.CloseWait, 100, 40003, "10.0.0.3:9092", 13), sock(netstat.Established, 100, 40004, "10.0.0.1:9092", 14),
		// Held CLOSE, as netstat lists them: no addresses a one-shot scan knows.
		{Family: netstat.IPv4, State: netstat.Close, PID: 100, Inode: 15}, {Family: netstat.IPv4, State: netstat.Close, PID: 100, Inode: 16},
		sock(netstat.Established, 200, 41001, "10.0.0.1:9092", 21), sock(netstat.CloseWait, 200, 41002, "10.0.0.2:9092", 22),
		sock(netstat.Established, 300, 42001, "10.0.0.3:9092", 31),
	}
	return s, nil
}

func (f *fake) options() Options {
	return Options{
		ProcRoot: "/nonexistent", Duration: 60 * time.Second, Interval: 10 * time.Second, Arch: "amd64",
		Scan: f.scan,
		Identify: func(p netstat.Process) clients.Client {
			switch p.PID {
			case 100:
				return clients.Client{Library: clients.FranzGo, Version: "v1.22.3", Language: "Go",
					Evidence: []string{"Go build info of /proc/100/exe (/srv/orders, go1.26.8)", "module github.com/twmb/franz-go v1.22.3"}}
			case 200:
				return clients.Client{Library: clients.KafkaClients, Version: "3.9.0", Language: "Java", Evidence: []string{"/opt/app/kafka-clients-3.9.0.jar (class path -cp)"}}
			}
			return clients.Client{Evidence: []string{"client not identified", "no librdkafka in /proc/300/maps", "a python process whose main script /opt/tool/sync.py imports no Kafka client"}}
		},
		Threads: func(pid int) ([]clients.ThreadSample, error) {
			if pid != 200 {
				return []clients.ThreadSample{{TID: pid, Name: "main", State: 'S', Syscall: 202, HasSyscall: true}}, nil
			}
			return []clients.ThreadSample{
				{TID: 200, Name: "java", State: 'S', Syscall: 202, HasSyscall: true, Wchan: "futex_do_wait"},
				{TID: 211, Name: "kafka-producer-", State: 'S', Syscall: 232, HasSyscall: true, Wchan: "do_epoll_wait"},
				{TID: 212, Name: "kafka-producer-", State: 'S', Syscall: 202, HasSyscall: true, Wchan: "futex_do_wait"},
			}, nil
		},
		Config: func(pid int, c clients.Client) []procconfig.Source {
			if pid != 200 {
				return nil
			}
			f, err := config.Parse("/opt/app/producer.properties", []byte("bootstrap.servers=10.0.0.1:9092\nconnections.max.idle.ms=-1\nssl.key.password=s3cr3t-value\n"), config.Java)
			if err != nil {
				panic(err)
			}
			return []procconfig.Source{{Path: "/opt/app/producer.properties", How: "named on the command line", Dialect: "java", File: f}}
		},
		ReadProc: func(pid int) (netstat.Process, error) { return netstat.Process{}, os.ErrNotExist },
		// orders (pid 100) opens 5 fds every 10 s: 500 at t0, 530 a minute
		// later, 494 from its limit of 1024: EMFILE in ~16 minutes.
		FDs: func(pid int) (fds.Census, error) {
			if pid != 100 {
				return fds.Census{}, os.ErrPermission
			}
			n := 500 + 5*int(f.now.Sub(t0)/(10*time.Second))
			return fds.Census{PID: pid, Open: n, Highest: n + 2, Soft: 1024, Hard: 4096,
				ByKind: map[fds.Kind]int{fds.Socket: n - 20, fds.Pipe: 10, fds.Epoll: 4, fds.File: 6}}, nil
		},
		// The held CLOSE sockets stay held when checked again.
		Holds: func(pid, fd int, inode uint64) bool { return true },
		Sleep: func(ctx context.Context, d time.Duration) error { f.now = f.now.Add(d); return nil },
	}
}

func TestGolden(t *testing.T) {
	f := &fake{now: t0}
	r, err := Run(context.Background(), f.options())
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range Writers {
		var buf bytes.Buffer
		if err := w(&buf, r); err != nil {
			t.Fatal(err)
		}
		ext := map[string]string{"text": "txt", "json": "json", "markdown": "md", "wide": "wide.txt"}[name]
		golden := filepath.Join("testdata", "doctor."+ext+".golden")
		if *update {
			if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./doctor/ -update)", err)
		}
		if d := cmp.Diff(string(want), buf.String()); d != "" {
			t.Errorf("%s (-want +got):\n%s", golden, d)
		}
		for _, secret := range []string{"hunter2", "changeit", "s3cr3t-value"} {
			if strings.Contains(buf.String(), secret) {
				t.Errorf("%s output shows the secret %q", name, secret)
			}
		}
	}
}

// TestReport checks what a user reads off the report, format aside.
func TestReport(t *testing.T) {
	f := &fake{now: t0}
	r, err := Run(context.Background(), f.options())
	if err != nil {
		t.Fatal(err)
	}
	if r.Samples != 7 || len(r.Processes) != 3 {
		t.Fatalf("%d samples, %d processes; want 7 scans over 60s every 10s, and 3 processes", r.Samples, len(r.Processes))
	}
	by := map[int]Process{}
	for _, p := range r.Processes {
		by[p.PID] = p
	}
	franz, java, py := by[100], by[200], by[300]
	if franz.Sockets["CLOSE_WAIT"] != 3 || franz.Sockets["CLOSE"] != 2 || franz.Instances != nil || franz.OldestCloseWait == nil || franz.OldestCloseWait.Min != time.Minute {
		t.Errorf("franz-go process: %+v", franz)
	}
	if franz.Findings[0].ID != "close-wait-held" || !strings.Contains(franz.Findings[0].Fix, "kgo.ConnIdleTimeout") {
		t.Errorf("franz-go's first finding: %+v", franz.Findings[0])
	}
	var fdf *Finding
	for i := range franz.Findings {
		if franz.Findings[i].ID == "fd-limit-near" {
			fdf = &franz.Findings[i]
		}
	}
	if fdf == nil || fdf.Severity != analyzer.Warning || !strings.Contains(fdf.Title, "EMFILE") ||
		franz.FDs == nil || franz.FDs.Open != 530 || franz.FDs.UntilLimit < 16*time.Minute || franz.FDs.UntilLimit > 17*time.Minute {
		t.Errorf("franz-go's fds: %+v, finding %+v; want 530 open, +30/min, EMFILE in ~16m, a warning", franz.FDs, fdf)
	}
	if java.Instances == nil || *java.Instances != 2 || len(java.NetworkThreads) != 2 || java.NetworkThreads[1].State != clients.Blocked || java.NetworkThreads[0].State != clients.Polling {
		t.Errorf("java: instances %v, threads %+v; want 2, one polling, one blocked", java.Instances, java.NetworkThreads)
	}
	if len(java.ConfigFiles) != 1 || !strings.Contains(js(t, java.ConfigFiles), "KD101") {
		t.Errorf("java config: %+v", java.ConfigFiles)
	}
	if py.Client.Identified() || py.Findings[len(py.Findings)-1].ID != KindNotIdentified {
		t.Errorf("python: %+v", py)
	}
	for _, fd := range franz.Findings {
		if strings.Contains(js(t, fd), "jstack") {
			t.Errorf("a Go process got a Java cause: %+v", fd)
		}
	}
	if got := r.ExitCode(); got != 1 {
		t.Errorf("exit code %d, want 1 (warnings, no critical)", got)
	}
}

func js(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBlindIsUnknown: when the scan could not attribute CLOSE_WAIT sockets
// (a process kdiag may not read), doctor exits 3 and says why first; a
// process that exited during the scan is not that.
func TestBlindIsUnknown(t *testing.T) {
	f := &fake{now: t0}
	o := f.options()
	scan := o.Scan
	o.Scan = func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error) {
		s, err := scan(ctx, q)
		s.Notes = append(s.Notes, "pid 4 exited before its details were read; 1 socket is left unattributed")
		return s, err
	}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Blind || r.ExitCode() == 3 {
		t.Errorf("an exited process made doctor blind: %q", r.BlindReason)
	}
	o.Scan = func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error) {
		s, err := scan(ctx, q)
		s.Unseen = &netstat.Unseen{Sockets: map[string]int{"CLOSE_WAIT": 30}, Reason: "the fds of pid 1 (init) could not be read (permission denied)"}
		return s, err
	}
	if r, err = Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(buf.String(), "\n", 3)
	want := "UNKNOWN: 30 CLOSE_WAIT sockets unattributed: the fds of pid 1 (init) could not be read (permission denied)"
	if r.ExitCode() != 3 || len(lines) < 2 || !strings.HasPrefix(lines[1], want) {
		t.Errorf("exit %d, text:\n%s\nwant exit 3 and, first, %q", r.ExitCode(), buf.String(), want)
	}
}

// TestMeasuredBrokerIdle: the idle time before the FIN of a process's
// CLOSE_WAIT sockets is the broker's idle timeout doctor lints against,
// unless --broker-idle-ms says otherwise.
func TestMeasuredBrokerIdle(t *testing.T) {
	f := &fake{now: t0}
	o := f.options()
	scan := o.Scan
	o.Scan = func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error) {
		s, err := scan(ctx, q)
		for i := range s.Sockets {
			if x := &s.Sockets[i]; x.State == netstat.CloseWait && x.PID == 200 {
				x.IdleMS = 300000
			}
		}
		return s, err
	}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Processes {
		if want := map[int]int64{200: 300000}[p.PID]; p.BrokerIdleMS != want {
			t.Errorf("pid %d: broker idle %d ms, want %d", p.PID, p.BrokerIdleMS, want)
		}
	}
	o.BrokerIdleGiven, o.BrokerIdleMS = true, 600000
	if r, err = Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Processes {
		if p.BrokerIdleMS != 0 {
			t.Errorf("pid %d: broker idle %d ms measured over --broker-idle-ms", p.PID, p.BrokerIdleMS)
		}
	}
}

// TestInstancesMany: eight Java producers alive in one JVM are a warning at
// one look, with the epoll fds they bring; two are not.
func TestInstancesMany(t *testing.T) {
	for _, n := range []int{2, 8} {
		f := &fake{now: t0}
		o := f.options()
		o.Duration = 0
		o.Threads = func(pid int) ([]clients.ThreadSample, error) {
			ts := []clients.ThreadSample{{TID: pid, Name: "java", State: 'S', Syscall: 202, HasSyscall: true}}
			for i := range n {
				ts = append(ts, clients.ThreadSample{TID: pid + 10 + i, Name: "kafka-producer-", State: 'S', Syscall: 232, HasSyscall: true, Wchan: "do_epoll_wait"})
			}
			return ts, nil
		}
		o.FDs = func(pid int) (fds.Census, error) {
			return fds.Census{PID: pid, Open: 40 + 2*n, Soft: 65536, Hard: 65536, ByKind: map[fds.Kind]int{fds.Epoll: n + 1, fds.EventFD: n + 1, fds.File: 38}}, nil
		}
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		var java Process
		for _, p := range r.Processes {
			if p.PID == 200 {
				java = p
			}
		}
		var got *Finding
		for i := range java.Findings {
			if java.Findings[i].ID == analyzer.KindInstancesMany {
				got = &java.Findings[i]
			}
		}
		switch {
		case n < 8 && got != nil:
			t.Errorf("%d instances: %+v, want no finding", n, got)
		case n >= 8 && (got == nil || got.Severity != analyzer.Warning || !strings.Contains(strings.Join(got.KeyEvidence, " "), "9 epoll")):
			t.Errorf("%d instances: %+v, want a warning citing 9 epoll instances", n, got)
		}
	}
}
