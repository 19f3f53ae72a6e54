package clients_test

// The real Java producer: kafka-clients 2.1.1 and 3.9.0, built from the
// apache/kafka source (../shared/java-clients/, its README says how), run
// against kdiag's broker with a small driver program that the test
// compiles against each jar. The driver takes one command a line on its
// standard input, so that the test drives every step (a send, a callback
// that blocks the network thread until the test releases it, close) and
// never races a timer; the broker's idle close is driven too
// (Cluster.CloseIdle).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
)

// javaDriver is the driver: producers (system property "producers",
// default 1) named producer-1, producer-2, ... and, on standard input:
//
//	send I         send a record with producer I (from 1); its callback prints "acked N"
//	send-block I   the same, but the callback prints "blocking N" and waits
//	               on the network thread until "release"
//	release        let every blocked callback return
//	close          close every producer, print "closed", exit
//
// Extra arguments are producer settings, key=value. It compiles against
// both versions' API (Java 8 for 2.1.1).
const javaDriver = `import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class Driver {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            p.put(kv[0], kv[1]);
        }
        String topic = args[1];
        List<KafkaProducer<String, String>> producers = new ArrayList<>();
        int n = Integer.getInteger("producers", 1);
        for (int i = 1; i <= n; i++) {
            p.put("client.id", "producer-" + i);
            producers.add(new KafkaProducer<String, String>(p));
        }
        System.out.println("created");
        final CountDownLatch gate = new CountDownLatch(1);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        int sent = 0;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("send") || f[0].equals("send-block")) {
                final int msg = sent++;
                final boolean block = f[0].equals("send-block");
                producers.get(Integer.parseInt(f[1]) - 1).send(new ProducerRecord<String, String>(topic, "message " + msg), (md, e) -> {
                    if (block) {
                        System.out.println("blocking " + msg);
                        try { gate.await(); } catch (InterruptedException ie) { }
                    }
                    System.out.println(e == null ? "acked " + msg : "failed " + msg + " " + e);
                });
            } else if (f[0].equals("release")) {
                gate.countDown();
            } else if (f[0].equals("close")) {
                break;
            }
        }
        gate.countDown();
        for (KafkaProducer<String, String> pr : producers) pr.close();
        System.out.println("closed");
    }
}
`

// javaVersions are the kafka-clients builds in ../shared/java-clients/,
// with the runtime jars each needs from Debian (/usr/share/java).
var javaVersions = []struct {
	version, release string
	runtime          []string
}{
	{"2.1.1", "8", []string{"slf4j-api.jar", "slf4j-simple.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"}},
	{"3.9.0", "11", []string{"slf4j-api.jar", "slf4j-simple.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "protobuf.jar"}},
}

// javaClientsDir is where the jars are: $KDIAG_JAVA_CLIENTS, or
// ../shared/java-clients beside the module's root (where CI's checkout has
// shared/).
func javaClientsDir() string {
	if d := os.Getenv("KDIAG_JAVA_CLIENTS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "java-clients")
}

// javaDriverFor compiles the driver against kafka-clients version and
// returns the java binary and the class path to run it with; it skips the
// test, saying what is missing and where to get it, when something is.
func javaDriverFor(t *testing.T, version string) (java, classpath string) {
	t.Helper()
	return javaProgramFor(t, version, "Driver", javaDriver)
}

// javaProgramFor is javaDriverFor for any single-class program: class is
// its name, source its Java source.
func javaProgramFor(t *testing.T, version, class, source string) (java, classpath string) {
	t.Helper()
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Skip("javac not installed (Debian package default-jdk-headless; .ci/run installs it)")
	}
	if java, err = exec.LookPath("java"); err != nil {
		t.Skip("java not installed (Debian package default-jdk-headless; .ci/run installs it)")
	}
	for _, v := range javaVersions {
		if v.version != version {
			continue
		}
		jar, err := filepath.Abs(filepath.Join(javaClientsDir(), "kafka-clients-"+version+".jar"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(jar); err != nil {
			t.Skipf("%s: %v: the real Java client is not here (it lives in shared/java-clients/ beside the repository, "+
				"rebuilt by its build-*.sh from the apache/kafka source; set KDIAG_JAVA_CLIENTS to its folder)", jar, err)
		}
		cp := []string{jar}
		for _, r := range v.runtime {
			p := filepath.Join("/usr/share/java", r)
			if _, err := os.Stat(p); err != nil {
				t.Skipf("%s missing (Debian packages libslf4j-java liblz4-java libsnappy-java libzstd-jni-java libprotobuf-java; .ci/run installs them)", p)
			}
			cp = append(cp, p)
		}
		dir := t.TempDir()
		src := filepath.Join(dir, class+".java")
		if err := os.WriteFile(src, []byte(source), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(javac, "--release", v.release, "-nowarn", "-d", dir, "-cp", strings.Join(cp, ":"), src).CombinedOutput(); err != nil {
			t.Fatalf("javac against kafka-clients %s: %v\n%s", version, err, out)
		}
		return java, strings.Join(append([]string{dir}, cp...), ":")
	}
	t.Fatalf("no kafka-clients %s in javaVersions", version)
	return "", ""
}

// javaProducer is a running driver.
type javaProducer struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int

	mu    sync.Mutex
	lines []string
	log   strings.Builder // stderr: slf4j-simple's log
	added chan struct{}
}

// startJava runs the driver for version against bootstrap, with settings
// (key=value) and producers instances; its log has NetworkClient's and
// Selector's DEBUG lines.
func startJava(t *testing.T, version, bootstrap string, producers int, settings ...string) *javaProducer {
	t.Helper()
	java, cp := javaDriverFor(t, version)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	args := []string{"-Xmx128m", fmt.Sprintf("-Dproducers=%d", producers),
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug",
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.network.Selector=debug",
		"-cp", cp, "Driver", bootstrap, "live"}
	cmd := exec.CommandContext(ctx, java, append(args, settings...)...)
	cmd.WaitDelay = 5 * time.Second
	j := &javaProducer{t: t, cmd: cmd, added: make(chan struct{}, 1)}
	var err error
	if j.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &j.mu, w: &j.log}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j.pid = cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			j.mu.Lock()
			j.lines = append(j.lines, sc.Text())
			j.mu.Unlock()
			select {
			case j.added <- struct{}{}:
			default:
			}
		}
	}()
	j.waitLine("created")
	return j
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// do sends the driver one command.
func (j *javaProducer) do(cmd string) {
	j.t.Helper()
	if _, err := fmt.Fprintln(j.stdin, cmd); err != nil {
		j.t.Fatalf("driver: %s: %v", cmd, err)
	}
}

// waitLine waits, for at most 90 s (a JVM starting on a loaded machine),
// until the driver has printed line.
func (j *javaProducer) waitLine(line string) {
	j.t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		j.mu.Lock()
		for _, l := range j.lines {
			if l == line {
				j.mu.Unlock()
				return
			}
		}
		j.mu.Unlock()
		select {
		case <-j.added:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			j.t.Fatalf("the Java producer did not print %q within 90s; stdout %q; log:\n%s", line, j.stdout(), j.stderr())
		}
	}
}

func (j *javaProducer) stdout() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

func (j *javaProducer) stderr() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.log.String()
}

// sockets returns the process's TCP sockets to c's brokers, by state.
func sockets(t *testing.T, pid int, c *broker.Cluster) map[string]netstat.State {
	t.Helper()
	br, err := netstat.ParseBrokers(c.BootstrapServers())
	if err != nil {
		t.Fatal(err)
	}
	s, err := netstat.NewScanner("/proc").Scan(context.Background(), netstat.Query{PIDs: []int{pid}, Brokers: br,
		States: netstat.AllStates})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]netstat.State{}
	for _, k := range s.Sockets {
		// Java's sockets are IPv6 ones holding IPv4-mapped addresses;
		// the broker's log has the plain IPv4 address.
		out[netip.AddrPortFrom(k.Local.Addr().Unmap(), k.Local.Port()).String()] = k.State
	}
	return out
}

// idleBroker is one broker with no idle timer of its own: the test closes
// idle connections itself (closeIdle), and the broker's log says which.
type idleBroker struct {
	*broker.Cluster
	mu     sync.Mutex
	closes []string // the client addresses of the connections closed for idleness
}

func (b *idleBroker) Enabled(context.Context, slog.Level) bool { return true }
func (b *idleBroker) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "closed connection" {
		return nil
	}
	var remote, reason string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "remote":
			remote = a.Value.String()
		case "reason":
			reason = a.Value.String()
		}
		return true
	})
	if reason == string(broker.ReasonIdle) {
		b.mu.Lock()
		b.closes = append(b.closes, remote)
		b.mu.Unlock()
	}
	return nil
}
func (b *idleBroker) WithAttrs([]slog.Attr) slog.Handler { return b }
func (b *idleBroker) WithGroup(string) slog.Handler      { return b }

func startIdleBroker(t *testing.T) *idleBroker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := &idleBroker{}
	c, err := broker.Start(ctx, broker.Config{Brokers: 1, Ports: []int{0}, Topics: []string{"live"}, Logger: slog.New(b)})
	if err != nil {
		t.Fatal(err)
	}
	b.Cluster = c
	t.Cleanup(c.Close)
	return b
}

// closeIdle drives the broker's idle close of the connections idle now
// (none waits for a response) and returns the client's addresses of those
// it closed, from the broker's log; each is checked to be one of the
// client's sockets (pid's), so that a socket gone later is one that was.
func (b *idleBroker) closeIdle(t *testing.T, pid int) []string {
	t.Helper()
	before := sockets(t, pid, b.Cluster)
	b.mu.Lock()
	from := len(b.closes)
	b.mu.Unlock()
	testio.WaitFor(t, 20*time.Second, "the broker closes an idle connection", func() bool { return b.CloseIdle() > 0 })
	b.mu.Lock()
	closed := append([]string(nil), b.closes[from:]...)
	b.mu.Unlock()
	for _, l := range closed {
		if _, ok := before[l]; !ok {
			t.Fatalf("the broker closed %s, not one of the client's sockets %v", l, before)
		}
	}
	return closed
}

// TestJavaProducer runs the real KafkaProducer, both versions, against
// kdiag's broker: with its network thread polling, the broker's idle close
// leaves no CLOSE_WAIT (each closed socket is gone, read and closed by the
// client); with a send callback blocking the network thread, every socket
// the broker closed stays in CLOSE_WAIT for as long as the callback blocks,
// and is closed once the test releases it. kdiag doctor names the client
// and its version, counts one instance and says whether its network thread
// polls or is blocked.
func TestJavaProducer(t *testing.T) {
	for _, v := range javaVersions {
		t.Run(v.version, func(t *testing.T) {
			c := startIdleBroker(t)
			j := startJava(t, v.version, c.BootstrapServers(), 1)
			j.do("send 1")
			j.waitLine("acked 0")

			// Polling: the broker's close is read and the socket closed.
			local := c.closeIdle(t, j.pid)
			testio.WaitFor(t, 30*time.Second, "the client closes every socket the broker closed", func() bool {
				now := sockets(t, j.pid, c.Cluster)
				for _, l := range local {
					if _, ok := now[l]; ok {
						return false
					}
				}
				return true
			})
			p := runDoctor(t, j.pid, c.Cluster)
			checkJavaDoctor(t, p, v.version, clients.Polling)
			if ids := findingIDs(p); has(ids, "close-wait-held") || has(ids, "close-wait-growing") {
				t.Errorf("doctor finds CLOSE_WAIT in a polling client: %v", ids)
			}

			// Blocked: a callback holds the network thread.
			j.do("send-block 1")
			j.waitLine("blocking 1")
			local = c.closeIdle(t, j.pid)
			inCloseWait := func() bool {
				now := sockets(t, j.pid, c.Cluster)
				for _, l := range local {
					if now[l] != netstat.CloseWait {
						return false
					}
				}
				return true
			}
			testio.WaitFor(t, 30*time.Second, "every socket the broker closed in CLOSE_WAIT", inCloseWait)
			// However long the callback blocks, they stay: sampled over
			// more than doctor's stuck age (1 s) while it does.
			for range 6 {
				time.Sleep(250 * time.Millisecond)
				if !inCloseWait() {
					t.Fatalf("a socket left CLOSE_WAIT while the callback still blocks: %v", sockets(t, j.pid, c.Cluster))
				}
			}
			p = runDoctor(t, j.pid, c.Cluster)
			checkJavaDoctor(t, p, v.version, clients.Blocked)
			ids := findingIDs(p)
			if !has(ids, "close-wait-held") {
				t.Errorf("doctor's findings %v, want close-wait-held", ids)
			}
			t.Logf("kafka-clients %s, callback blocking: %d sockets in CLOSE_WAIT; doctor: %s, threads %+v, findings %v",
				v.version, len(local), p.Client, p.NetworkThreads, ids)

			// Released: the thread polls again and closes them.
			j.do("release")
			j.waitLine("acked 1")
			testio.WaitFor(t, 30*time.Second, "the client closes its CLOSE_WAIT sockets once the callback returns", func() bool {
				now := sockets(t, j.pid, c.Cluster)
				for _, l := range local {
					if _, ok := now[l]; ok {
						return false
					}
				}
				return true
			})
			j.do("close")
			j.waitLine("closed")

			// Last: the fix for a blocked network thread is to unblock it;
			// the client's idle timeout does not help while it is blocked
			// (measured: ../shared/java-clients/README.md).
			for _, f := range p.Findings {
				for _, cause := range f.Causes {
					if cause.ID != "network-thread-blocked" {
						continue
					}
					for what, fix := range map[string]string{f.ID: f.Fix, f.ID + "/" + cause.ID: cause.Fix} {
						// Saying it does not help is right; recommending it is not.
						if strings.Contains(strings.ReplaceAll(fix, "connections.max.idle.ms does not help", ""), "connections.max.idle.ms") {
							t.Errorf("%s: the fix for a blocked network thread cites connections.max.idle.ms, which does not help while the thread is blocked: %q", what, fix)
						}
					}
				}
			}
		})
	}
}

// checkJavaDoctor: doctor names kafka-clients at version, one instance, one
// network thread in state.
func checkJavaDoctor(t *testing.T, p doctor.Process, version, state string) {
	t.Helper()
	if p.Client.Library != clients.KafkaClients || p.Client.Version != version {
		t.Errorf("doctor names the client %+v, want kafka-clients %s", p.Client, version)
	}
	if p.Instances == nil || *p.Instances != 1 {
		t.Errorf("doctor counts %v instances, want 1", p.Instances)
	}
	if len(p.NetworkThreads) != 1 || p.NetworkThreads[0].State != state {
		t.Errorf("network threads %+v, want one, %s", p.NetworkThreads, state)
	}
}
