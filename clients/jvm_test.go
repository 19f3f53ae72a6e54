package clients_test

import (
	"archive/zip"
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/netstat"
)

// The JVM thread test: real Java threads named as KafkaProducer names its
// Sender ("kafka-producer-network-thread | <client.id>"), one waiting in a
// real java.nio Selector (epoll), one stuck sleeping under a lock, as a
// network thread blocked by a slow callback is. doctor must count two
// instances, call the first polling and the second blocked, and say so.
const jvmSource = `import java.nio.channels.Selector;

public class Threads {
    public static void main(String[] args) throws Exception {
        Object lock = new Object();
        Thread polling = new Thread(() -> {
            try (Selector s = Selector.open()) {
                while (true) s.select();
            } catch (Exception e) { throw new RuntimeException(e); }
        }, "kafka-producer-network-thread | app-1");
        Thread stuck = new Thread(() -> {
            synchronized (lock) {
                try { Thread.sleep(600_000); } catch (InterruptedException e) { }
            }
        }, "kafka-producer-network-thread | app-2");
        polling.setDaemon(true);
        stuck.setDaemon(true);
        polling.start();
        stuck.start();
        System.out.println("started");
        Thread.sleep(600_000);
    }
}
`

func TestJVMNetworkThreads(t *testing.T) {
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Skip("javac not installed (Debian package default-jdk-headless; .ci/run installs it)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("java not installed (Debian package default-jdk-headless)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Threads.java"), []byte(jvmSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-d", dir, filepath.Join(dir, "Threads.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	// A jar named and versioned as kafka-clients on the class path, as
	// identification reads it: a test fixture with the version file the
	// real jar has, not the Kafka client.
	jar := filepath.Join(dir, "kafka-clients-3.9.0.jar")
	f, err := os.Create(jar)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, _ := zw.Create("kafka/kafka-version.properties")
	w.Write([]byte("version=3.9.0\n"))
	zw.Close()
	f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, "-Xmx64m", "-cp", dir+":"+jar, "Threads")
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "started" {
		t.Fatalf("java did not start its threads: %s", stderr.String())
	}
	pid := cmd.Process.Pid
	// The threads are started; wait until both are parked where the test
	// says (the selector in epoll, the sleeper in its futex), with a bound.
	lib, _ := clients.Lookup(clients.KafkaClients)
	waitFor(t, 30*time.Second, "the selector thread in epoll and the stuck one outside it", func() bool {
		ts, err := clients.ReadThreads("/proc", pid)
		if err != nil {
			t.Fatal(err)
		}
		th := clients.Classify(lib, [][]clients.ThreadSample{ts}, clients.HostArch)
		return len(th.Network) == 2 && th.Network[0].State == clients.Polling && th.Network[1].State == clients.Blocked
	})
	r, err := doctor.Run(context.Background(), doctor.Options{Query: netstat.Query{PIDs: []int{pid}}})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Processes[0]
	if p.Client.Library != clients.KafkaClients || p.Client.Version != "3.9.0" {
		t.Errorf("client %+v, want kafka-clients 3.9.0", p.Client)
	}
	if p.Instances == nil || *p.Instances != 2 {
		t.Errorf("instances %v, want 2", p.Instances)
	}
	if len(p.NetworkThreads) != 2 {
		t.Fatalf("network threads %+v, want 2", p.NetworkThreads)
	}
	poll, stuck := p.NetworkThreads[0], p.NetworkThreads[1]
	if poll.Name != "kafka-producer-" || poll.State != clients.Polling || !clients.IsPoll(clients.HostArch, poll.Syscall) {
		t.Errorf("the selector thread: %+v, want kafka-producer- (the 15 bytes Linux keeps), polling in an epoll call", poll)
	}
	if stuck.State != clients.Blocked || clients.IsPoll(clients.HostArch, stuck.Syscall) {
		t.Errorf("the stuck thread: %+v, want blocked outside any poll call", stuck)
	}
	var found bool
	for _, f := range p.Findings {
		if f.ID == "network-thread-blocked" && strings.Contains(f.Fix, "jstack") {
			found = true
		}
	}
	if !found {
		t.Errorf("findings %+v: want network-thread-blocked with the jstack fix", p.Findings)
	}
	t.Logf("JVM threads: %+v; findings %d", p.NetworkThreads, len(p.Findings))
}
