package analyzer

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/netstat"
)

// heldSeries is a process holding n CLOSE_WAIT sockets (FIN unread) to a
// broker for 90 s, past the stuck age.
func heldSeries(p netstat.Process, n int) []netstat.Snapshot {
	var snaps []netstat.Snapshot
	for i := range 10 {
		snaps = append(snaps, snap(float64(i*10), spec{p: p, cw: n, inode: 1, recvQ: 1}))
	}
	return snaps
}

func causeIDs(f Finding) []string {
	var ids []string
	for _, c := range f.Causes {
		ids = append(ids, c.ID)
	}
	return ids
}

func allText(f Finding) string {
	var b strings.Builder
	b.WriteString(f.Summary + "\n" + strings.Join(f.Details, "\n"))
	for _, c := range f.Causes {
		b.WriteString("\n" + c.Text + " [" + strings.Join(c.Rules, ", ") + "]\n" + strings.Join(c.Evidence, "\n"))
	}
	return b.String()
}

func TestDiagnoseByClient(t *testing.T) {
	franz := clients.Client{Library: clients.FranzGo, Version: "v1.22.3", Language: "Go", Evidence: []string{"module github.com/twmb/franz-go v1.22.3"}}
	java := clients.Client{Library: clients.KafkaClients, Version: "3.9.0", Language: "Java", Evidence: []string{"kafka-clients-3.9.0.jar"}}
	for _, tc := range []struct {
		name      string
		p         netstat.Process
		client    clients.Client
		wantFirst string
		want, not []string
	}{
		{"franz-go", proc(10, "orders", t0), franz, "client-does-not-read-idle",
			[]string{"Client: franz-go v1.22.3", "kgo.ConnIdleTimeout", "handleResps"}, []string{"jstack", "KafkaProducer", "kafka-producer-network-thread"}},
		{"java", proc(11, "java", t0), java, "reader-not-running",
			[]string{"kafka-producer-network-thread", "jstack", "KD101"}, []string{"kgo.", "Sarama"}},
		{"not identified, Kafka ports", proc(12, "app", t0), clients.Client{}, "idle-timeout-not-below-broker",
			[]string{"Sarama, franz-go and kafka-go"}, []string{"jstack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Analyze(heldSeries(tc.p, 3), Options{Identify: func(netstat.Process) clients.Client { return tc.client }})
			if len(a.Findings) != 1 || a.Findings[0].Kind != KindHeld {
				t.Fatalf("findings = %+v, want one close-wait-held", a.Findings)
			}
			f := a.Findings[0]
			if ids := causeIDs(f); len(ids) == 0 || ids[0] != tc.wantFirst {
				t.Errorf("causes %v, want %s first", ids, tc.wantFirst)
			}
			text := allText(f)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("lacks %q:\n%s", w, text)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(text, w) {
					t.Errorf("has %q:\n%s", w, text)
				}
			}
		})
	}
}

// TestDiagnoseNotKafka: a process with CLOSE_WAIT to no Kafka port, not
// identified, gets plain TCP causes: nothing about Kafka or Java.
func TestDiagnoseNotKafka(t *testing.T) {
	var snaps []netstat.Snapshot
	for i := range 10 {
		s := snap(float64(i*10), spec{p: proc(20, "python3", t0), cw: 2, inode: 1, recvQ: 1})
		for j := range s.Sockets {
			s.Sockets[j].Remote = netip.MustParseAddrPort("10.0.0.5:8080")
		}
		snaps = append(snaps, s)
	}
	a := Analyze(snaps, Options{})
	if len(a.Findings) != 1 {
		t.Fatalf("findings = %+v", a.Findings)
	}
	text := allText(a.Findings[0])
	for _, w := range []string{"Kafka", "broker", "jstack", "connections.max.idle.ms", "producer", "KD10"} {
		if strings.Contains(text, w) {
			t.Errorf("a process that is no Kafka client: the diagnosis says %q:\n%s", w, text)
		}
	}
	if ids := causeIDs(a.Findings[0]); ids[0] != "peer-close-unread" {
		t.Errorf("causes %v, want peer-close-unread first", ids)
	}
}

func TestDiagnoseDoctorEvidence(t *testing.T) {
	java := clients.Client{Library: clients.KafkaClients, Version: "3.9.0", Language: "Java"}
	lib, _ := clients.Lookup(clients.KafkaClients)
	threads := clients.Classify(lib, [][]clients.ThreadSample{
		{{TID: 7, Name: "kafka-producer-", State: 'S', Syscall: 232, HasSyscall: true}, {TID: 8, Name: "kafka-producer-", State: 'S', Syscall: 202, HasSyscall: true, Wchan: "futex_do_wait"}},
		{{TID: 7, Name: "kafka-producer-", State: 'S', Syscall: 232, HasSyscall: true}, {TID: 8, Name: "kafka-producer-", State: 'S', Syscall: 202, HasSyscall: true, Wchan: "futex_do_wait"},
			{TID: 9, Name: "kafka-producer-", State: 'S', Syscall: 232, HasSyscall: true}},
	}, "amd64")
	a := Analyze(heldSeries(proc(30, "java", t0), 2), Options{})
	p := &a.Processes[0]
	ev := Evidence{Client: java, Threads: &threads, HeldClosed: 4,
		Config: []ConfigFact{{Rule: "KD101", Where: "app.properties:3", Message: "connections.max.idle.ms is -1"}}}
	fs := Diagnose(a, p, ev, Options{})
	kinds := map[string]Finding{}
	for _, f := range fs {
		kinds[f.Kind] = f
	}
	held, ok := kinds[KindHeld]
	if !ok {
		t.Fatalf("no close-wait-held finding: %+v", fs)
	}
	// The blocked thread seen is the cause, alone: a Java client reads idle
	// connections, and while its thread is blocked no idle setting helps
	// (measured with kafka-clients 3.9.0: the client's 2000 ms against the
	// broker's 3000, every socket stayed in CLOSE_WAIT 27 s).
	if ids := causeIDs(held); len(ids) != 1 || ids[0] != KindThreadBlocked {
		t.Errorf("causes %v, want the blocked thread alone", ids)
	}
	if text := allText(held); !strings.Contains(text, "Thread 8") || strings.Contains(text, "Thread 7 ") || strings.Contains(strings.ReplaceAll(held.Causes[0].Fix, "connections.max.idle.ms does not help", ""), "connections.max.idle.ms") {
		t.Errorf("evidence lacks the blocked thread 8 (and only it), or the fix cites the idle setting:\n%s", text)
	}
	if f, ok := kinds[KindInstancesGrowing]; !ok || !strings.Contains(f.Summary, "2 → 3") {
		t.Errorf("instances 2 → 3: finding %+v", f)
	}
	if f, ok := kinds[KindHeldClosed]; !ok || !strings.Contains(f.Summary, "4 TCP sockets") {
		t.Errorf("4 held closed: finding %+v", f)
	}
	if _, ok := kinds[KindThreadBlocked]; ok {
		t.Errorf("a blocked-thread finding beside the CLOSE_WAIT one whose cause it is: %+v", fs)
	}

	// Without CLOSE_WAIT the blocked thread is a finding of its own.
	var quiet []netstat.Snapshot
	for i := range 3 {
		quiet = append(quiet, snap(float64(i), spec{p: proc(31, "java", t0), est: 1, inode: 1}))
	}
	qa := Analyze(quiet, Options{})
	fs = Diagnose(qa, &qa.Processes[0], Evidence{Client: java, Threads: &threads, HeldClosed: -1}, Options{})
	if len(fs) != 2 || fs[0].Kind != KindInstancesGrowing && fs[1].Kind != KindThreadBlocked {
		t.Errorf("no CLOSE_WAIT, a blocked thread and growing instances: %+v", fs)
	}
}

func TestCloseWaitShapeStep(t *testing.T) {
	app := proc(40, "app", t0)
	var step, grow []netstat.Snapshot
	for i := range 40 {
		n := 0
		if i >= 15 {
			n = 6 // every connection closed by the broker at once
		}
		step = append(step, snap(float64(i), spec{p: app, cw: n, est: 1, inode: 1, recvQ: 1}))
		grow = append(grow, snap(float64(i), spec{p: app, cw: i / 2, est: 1, inode: 1, recvQ: 1}))
	}
	sa := Analyze(step, Options{})
	if got := CloseWaitShape(&sa.Processes[0], Options{}); got != ShapeStep {
		t.Errorf("0 → 6 at once: shape %s, want step (verdict %s)", got, sa.Processes[0].CloseWait.Verdict)
	}
	if sa.Processes[0].CloseWait.Verdict == Growing && (len(sa.Findings) != 1 || sa.Findings[0].Kind != KindStep) {
		t.Errorf("a step the fit calls growing: findings %+v, want close-wait-step", sa.Findings)
	}
	ga := Analyze(grow, Options{})
	if got := CloseWaitShape(&ga.Processes[0], Options{}); got != Growing.String() {
		t.Errorf("steady growth: shape %s, want growing", got)
	}
}
