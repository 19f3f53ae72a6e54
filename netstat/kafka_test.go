package netstat

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestKafkaReason(t *testing.T) {
	root := t.TempDir()
	mk := func(pid int, files map[string]string, links map[string]string) {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for fd, target := range links {
			if err := os.Symlink(target, filepath.Join(dir, "fd", fd)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk(1, nil, nil)
	mk(2, map[string]string{"environ": "HOME=/root\x00CLASSPATH=/opt/app/lib/kafka-clients-3.7.0.jar:/opt/app/lib/x.jar\x00"}, nil)
	mk(3, nil, map[string]string{"3": "/opt/app/lib/slf4j.jar", "4": "/opt/app/lib/kafka-clients-3.9.1-ccs.jar"})
	mk(4, map[string]string{"maps": "7f00-7f01 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6\n" +
		"7f10-7f11 r-xp 00000000 08:01 1235 /usr/lib/x86_64-linux-gnu/librdkafka.so.1\n"}, nil)
	mk(5, nil, nil)

	tests := []struct {
		name string
		ev   kafkaEvidence
		want string
	}{
		{"nothing", kafkaEvidence{pid: 1, name: "nginx", args: []string{"nginx"}}, ""},
		{"-cp", kafkaEvidence{pid: 1, name: "java", args: []string{"/usr/bin/java", "-cp", "a.jar:/l/kafka-clients-3.7.0.jar", "Main"}},
			"kafka-clients on class path (kafka-clients-3.7.0.jar)"},
		{"-Djava.class.path", kafkaEvidence{pid: 1, name: "java", args: []string{"java", "-Djava.class.path=/l/kafka-clients.jar"}},
			"kafka-clients on class path (kafka-clients.jar)"},
		{"CLASSPATH", kafkaEvidence{pid: 2, name: "java", args: []string{"java", "Main"}},
			"kafka-clients on class path (kafka-clients-3.7.0.jar)"},
		{"open jar", kafkaEvidence{pid: 3, name: "java", args: []string{"java", "-jar", "app.jar"}},
			"kafka-clients jar open (kafka-clients-3.9.1-ccs.jar)"},
		{"open jar, not a JVM", kafkaEvidence{pid: 3, name: "python3", args: []string{"python3"}}, ""},
		{"librdkafka", kafkaEvidence{pid: 4, name: "producer", args: []string{"./producer"}}, "maps librdkafka (librdkafka.so.1)"},
		{"default ports", kafkaEvidence{pid: 5, name: "app", brokerSockets: 1}, "sockets to brokers (1 to ports 9092-9094)"},
		{"brokers", kafkaEvidence{pid: 5, name: "app", brokerSockets: 2, haveBrokers: true}, "sockets to brokers (2 to --brokers)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ev.procRoot = root
			if got := kafkaReason(tt.ev); got != tt.want {
				t.Errorf("kafkaReason = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestKafkaOwnKept: a repeated scan reads a JVM's open files for the
// kafka-clients jar once, not every scan: a negative answer holds for
// kafkaRecheck, a positive one for the process's life; a new process on
// the pid (another start time) or an exec (another command line) is read
// afresh, and a one-shot scan always reads.
func TestKafkaOwnKept(t *testing.T) {
	root := t.TempDir()
	fd := filepath.Join(root, "7", "fd")
	if err := os.MkdirAll(fd, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(n, target string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(fd, n)); err != nil {
			t.Fatal(err)
		}
	}
	link("3", "/app/app.jar")
	s := NewScanner(root)
	ev := kafkaEvidence{procRoot: root, pid: 7, name: "java", args: []string{"java", "-jar", "app.jar"}}
	start := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)
	const open = "kafka-clients jar open (kafka-clients-3.7.0.jar)"
	steps := []struct {
		name    string
		do      func()
		at      time.Duration
		start   time.Time
		args    []string
		noCache bool
		want    string
	}{
		{name: "first scan: no jar", want: ""},
		{name: "jar opened, 1s later: the answer kept", do: func() { link("4", "/libs/kafka-clients-3.7.0.jar") }, at: time.Second, want: ""},
		{name: "one-shot scan reads", at: 2 * time.Second, noCache: true, want: open},
		{name: "kafkaRecheck later: read again", at: kafkaRecheck + time.Second, want: open},
		{name: "jar closed: a yes is kept", do: func() { os.Remove(filepath.Join(fd, "4")) }, at: 10 * kafkaRecheck, want: open},
		{name: "another process on the pid", at: 10*kafkaRecheck + time.Second, start: start.Add(time.Minute), want: ""},
		{name: "jar open again, then an exec", do: func() { link("4", "/libs/kafka-clients-3.7.0.jar") }, at: 10*kafkaRecheck + 2*time.Second,
			start: start.Add(time.Minute), args: []string{"java", "-jar", "other.jar"}, want: open},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		e := ev
		if st.args != nil {
			e.args = st.args
		}
		s.NoCache = st.noCache
		got := s.kafkaOwn(e, orTime(st.start, start), now.Add(st.at))
		if got != st.want {
			t.Errorf("%s: %q, want %q", st.name, got, st.want)
		}
	}
	s.NoCache = false
	s.pruneKafka(map[int]*procTally{})
	if len(s.kafka) != 0 {
		t.Errorf("%d processes kept after a scan that saw none", len(s.kafka))
	}
}

// orTime returns t, or def when t is zero.
func orTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

func TestIsBrokerSocket(t *testing.T) {
	brokers, _ := ParseBrokers("127.0.0.1:19092")
	sock := func(st State, remote string) Socket {
		return Socket{State: st, Remote: netip.MustParseAddrPort(remote)}
	}
	tests := []struct {
		name    string
		s       Socket
		brokers []Endpoint
		want    bool
	}{
		{"default port 9093", sock(CloseWait, "127.0.0.1:9093"), nil, true},
		{"other port", sock(CloseWait, "127.0.0.1:80"), nil, false},
		{"listed broker", sock(Established, "127.0.0.1:19092"), brokers, true},
		{"default port, not listed", sock(Established, "127.0.0.1:9092"), brokers, false},
		{"listener", Socket{State: Listen, Local: netip.MustParseAddrPort("0.0.0.0:9092")}, nil, false},
	}
	for _, tt := range tests {
		if got := isBrokerSocket(tt.s, tt.brokers); got != tt.want {
			t.Errorf("%s: isBrokerSocket = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseMapsLibrdkafka(t *testing.T) {
	for in, want := range map[string]string{
		"": "",
		"7f10-7f11 r-xp 00000000 08:01 1235 /opt/lib/librdkafka.so.1\n":        "librdkafka.so.1",
		"7f10-7f11 r-xp 00000000 08:01 1235 /opt/librdkafka-tools/libfoo.so\n": "",
		"garbage librdkafka\n": "librdkafka",
	} {
		if got := parseMapsLibrdkafka(strings.NewReader(in)); got != want {
			t.Errorf("parseMapsLibrdkafka(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseMapsLibrdkafka(f *testing.F) {
	f.Add([]byte("7f10-7f11 r-xp 00000000 08:01 1235 /opt/lib/librdkafka.so.1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := parseMapsLibrdkafka(strings.NewReader(string(b))); got != "" && !strings.HasPrefix(got, "librdkafka") {
			t.Errorf("parseMapsLibrdkafka = %q", got)
		}
	})
}

func TestExplainRecvQ(t *testing.T) {
	for q, want := range map[uint32]string{0: "FIN was read", 1: "FIN was never read", 6: "5 bytes of data unread"} {
		if got := ExplainRecvQ(Socket{State: CloseWait, RecvQ: q}); !strings.Contains(got, want) {
			t.Errorf("ExplainRecvQ(Recv-Q %d) = %q, want it to say %q", q, got, want)
		}
	}
	if got := ExplainRecvQ(Socket{State: Established, RecvQ: 1}); got != "" {
		t.Errorf("ExplainRecvQ(ESTABLISHED) = %q, want \"\"", got)
	}
}
