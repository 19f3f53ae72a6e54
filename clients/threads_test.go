package clients

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// loadThreadFixture turns a thread fixture (testdata/threads/*.txt: the
// task files of real processes as capture.sh printed them, a "== sample N"
// line before each sample) into one proc tree per sample under a
// temporary directory, and reads each with ReadThreads, so that the
// fixture goes through the same reader as a live process.
func loadThreadFixture(t *testing.T, name string) [][]ThreadSample {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "threads", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := t.TempDir()
	const pid = 1
	var roots []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "== sample "):
			roots = append(roots, filepath.Join(base, strings.TrimPrefix(line, "== sample ")))
			continue
		}
		head, content, ok := strings.Cut(line, ": ")
		tid, file, ok2 := strings.Cut(head, " ")
		if !ok || !ok2 || len(roots) == 0 {
			t.Fatalf("%s:%d: want \"<tid> <file>: <content>\" after a \"== sample N\" line: %q", name, n, line)
		}
		dir := filepath.Join(roots[len(roots)-1], fmt.Sprint(pid), "task", tid)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, file), []byte(content+"\n"), 0o644))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var samples [][]ThreadSample
	for _, r := range roots {
		ts, err := ReadThreads(r, pid)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, ts)
	}
	return samples
}

// TestClassifyFixtures classifies the threads of real client processes,
// five samples each, and checks each network thread's state, system call
// and wait channel come from the same samples, with their counts.
func TestClassifyFixtures(t *testing.T) {
	type thread struct {
		TID         int
		Name, Words string
		Syscall     int
		Wchan       string
	}
	for _, tc := range []struct {
		fixture   string
		lib       string
		instances int
		want      []thread
	}{
		{"java-3.9.0-polling.txt", KafkaClients, 1, []thread{
			{27806, "kafka-producer-", "polling in epoll_wait 5/5", 232, "do_epoll_wait"}}},
		{"java-3.9.0-blocked.txt", KafkaClients, 1, []thread{
			{27798, "kafka-producer-", "blocked in futex 5/5", 202, "futex_do_wait"}}},
		{"kcat-2.0.2.txt", Librdkafka, 1, []thread{
			{29880, "rdk:broker-1", "blocked in futex 5/5", 202, "futex_do_wait"},
			{29881, "rdk:broker0", "polling in poll 5/5", 7, "poll_schedule_timeout.constprop.0"}}},
		// The last sample is in a futex: the state and the call both come
		// from the four polling samples, not the call from the last one.
		{"kcat-2.0.2-churn.txt", Librdkafka, 1, []thread{
			{29880, "rdk:broker-1", "blocked in futex 5/5", 202, "futex_do_wait"},
			{29881, "rdk:broker0", "polling in poll 4/5 (blocked in futex 1/5)", 7, "poll_schedule_timeout.constprop.0"}}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			samples := loadThreadFixture(t, tc.fixture)
			if len(samples) != 5 {
				t.Fatalf("%d samples, want 5", len(samples))
			}
			lib, _ := Lookup(tc.lib)
			// The fixtures were captured on x86-64: its system call numbers.
			got := Classify(lib, samples, "amd64")
			if got.Samples != 5 || got.Instances != tc.instances {
				t.Errorf("samples %d, instances %d; want 5 and %d", got.Samples, got.Instances, tc.instances)
			}
			var threads []thread
			for _, n := range got.Network {
				threads = append(threads, thread{n.TID, n.Name, n.Words(), n.Syscall, n.Wchan})
				if n.Seen != 5 || n.StateSamples < n.SyscallSamples || n.SyscallSamples < 1 {
					t.Errorf("thread %d: seen %d, state %d samples, call %d: want 5 >= state >= call >= 1", n.TID, n.Seen, n.StateSamples, n.SyscallSamples)
				}
				sum := 0
				for _, k := range n.Tally {
					sum += k.Samples
				}
				if sum != n.Seen {
					t.Errorf("thread %d: tally %+v counts %d samples, want %d", n.TID, n.Tally, sum, n.Seen)
				}
			}
			if d := cmp.Diff(tc.want, threads); d != "" {
				t.Errorf("network threads (-want +got):\n%s", d)
			}
		})
	}
}

// TestClassifyRule checks the rule's edges with constructed samples: one
// polling sample makes a thread polling; otherwise the majority, a tie
// going to the later sample; the call is the majority of the state's
// samples.
func TestClassifyRule(t *testing.T) {
	java, _ := Lookup(KafkaClients)
	const (
		futex     = 202
		epollWait = 232
		nanosleep = 35
		write     = 1
	)
	blocked := func(nr int) ThreadSample {
		return ThreadSample{TID: 7, Name: "kafka-producer-", State: 'S', Syscall: nr, HasSyscall: true, Wchan: fmt.Sprint("w", nr)}
	}
	running := ThreadSample{TID: 7, Name: "kafka-producer-", State: 'R', Syscall: -1, HasSyscall: true}
	unreadable := ThreadSample{TID: 7, Name: "kafka-producer-", State: 'S', Syscall: -1}
	for _, tc := range []struct {
		name       string
		seq        []ThreadSample
		state      string
		words      string
		nr         int
		wchan      string
		stateN, nN int
	}{
		{"one poll of five is polling", []ThreadSample{blocked(futex), blocked(futex), blocked(epollWait), blocked(futex), blocked(futex)},
			Polling, "polling in epoll_wait 1/5 (blocked in futex 4/5)", epollWait, "w232", 1, 1},
		{"majority blocked", []ThreadSample{running, blocked(futex), running, blocked(futex), blocked(futex)},
			Blocked, "blocked in futex 3/5 (busy, running 2/5)", futex, "w202", 3, 3},
		{"tie goes to the later", []ThreadSample{blocked(futex), running, blocked(futex), running, unreadable},
			Busy, "busy, running 2/5 (blocked in futex 2/5, unknown, system call unreadable 1/5)", -1, "", 2, 2},
		{"the state's call by majority", []ThreadSample{blocked(futex), blocked(nanosleep), blocked(futex), running, running},
			Blocked, "blocked 3/5, in futex 2/5 (busy, running 2/5, blocked in nanosleep 1/5)", futex, "w202", 3, 2},
		{"runnable in a call is busy", []ThreadSample{{TID: 7, Name: "kafka-producer-", State: 'R', Syscall: write, HasSyscall: true}},
			Busy, "busy in write 1/1", write, "", 1, 1},
		{"nothing readable", []ThreadSample{unreadable, unreadable}, Unknown, "unknown, system call unreadable 2/2", -1, "", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var samples [][]ThreadSample
			for _, s := range tc.seq {
				samples = append(samples, []ThreadSample{s})
			}
			got := Classify(java, samples, "amd64").Network
			if len(got) != 1 {
				t.Fatalf("%d network threads, want 1", len(got))
			}
			n := got[0]
			if n.State != tc.state || n.Words() != tc.words || n.Syscall != tc.nr || n.Wchan != tc.wchan ||
				n.StateSamples != tc.stateN || n.SyscallSamples != tc.nN || n.Seen != len(tc.seq) {
				t.Errorf("got %s %q call %d wchan %q (%d/%d in state, %d in call)\nwant %s %q call %d wchan %q (%d/%d, %d)",
					n.State, n.Words(), n.Syscall, n.Wchan, n.StateSamples, n.Seen, n.SyscallSamples,
					tc.state, tc.words, tc.nr, tc.wchan, tc.stateN, len(tc.seq), tc.nN)
			}
		})
	}
}
