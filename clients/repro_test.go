package clients_test

// The clients through `kdiag repro -- CMD`, as a user runs their own
// program: each real client (kcat, confluent-kafka-python, kafka-python,
// kafkajs, franz-go, Sarama, kafka-go, kafka-clients 2.1.1 and 3.9.0, the
// programs of live_test.go and java_test.go) runs under the kdiag binary,
// whose JSON verdict must be what the catalog says of the client: one that
// does not read idle connections holds them (HELD, exit 1), one that does
// closes them at once (OK, exit 0), and a Java client whose send callback
// blocks its network thread holds them while it blocks. Each verdict is
// also the client's row in measured.json, from which the catalog's
// measured rows and docs/clients.md are made: the test fails when the file
// says something else (-update-measured rewrites it). After every run,
// nothing the command started is left running.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/repro"
)

var updateMeasured = flag.Bool("update-measured", false, "rewrite "+clients.MeasuredFile+" from the verdicts of the repro tests")

// reproCase is one client run under kdiag repro -- CMD.
type reproCase struct {
	// lib and version are what kdiag must name; setup is measured.json's
	// (the client's configuration, "" for its defaults).
	lib, version, setup string
	// blocked: a send callback blocks the client's network thread.
	blocked bool
	// command says, for measured.json, what was run.
	command string
	// args is CMD and its arguments ({bootstrap} replaced by kdiag), env
	// what kdiag runs with, flags more kdiag repro flags.
	args  []string
	env   []string
	flags []string
	// duration is the run's --duration (default 20s).
	duration time.Duration
}

// runReproCase runs the case, checks its verdict against the catalog and
// measured.json, and that nothing it started is left, and returns what
// kdiag said.
func runReproCase(t *testing.T, c reproCase) *repro.CommandResult {
	t.Helper()
	res, code, stderr := runRepro(t, c)
	t.Logf("%s: exit %d: %s", c.lib, code, res.Verdict)
	for _, conn := range res.Connections {
		t.Logf("  %s %s closed by %q outcome %q held %dms", conn.Client, conn.Broker, conn.ClosedBy, conn.Outcome, conn.HeldMS())
	}
	if code != res.ExitCode {
		t.Errorf("kdiag repro exited %d, its JSON says %d; stderr:\n%s", code, res.ExitCode, stderr)
	}
	checkReproAsCatalog(t, c, res)
	checkMeasuredCurrent(t, c, res)
	return res
}

// runRepro runs `kdiag repro -o json --brokers 1 --topic live` with the
// case, and returns the result, the exit status and stderr.
func runRepro(t *testing.T, c reproCase) (*repro.CommandResult, int, string) {
	t.Helper()
	d := c.duration
	if d == 0 {
		d = 20 * time.Second
	}
	args := append([]string{"repro", "-o", "json", "--brokers", "1", "--topic", "live", "--duration", d.String()}, c.flags...)
	args = append(append(args, "--"), c.args...)
	ctx, cancel := context.WithTimeout(context.Background(), d+4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kdiagBin(t), args...)
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kdiag %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res repro.CommandResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("kdiag %s (exit %d): %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, err, stdout.String(), stderr.String())
	}
	checkNothingLeft(t, res.RunID)
	return &res, code, stderr.String()
}

// checkNothingLeft: no process carries the run's marker in its
// environment any more (every process CMD started inherits it).
func checkNothingLeft(t *testing.T, runID string) {
	t.Helper()
	if runID == "" {
		t.Fatal("the result names no run id")
	}
	if left := processesOfRun(runID); len(left) > 0 {
		t.Errorf("processes of the run left after kdiag repro exited: %v", left)
	}
}

// processesOfRun lists the live processes whose environment has
// KDIAG_REPRO_RUN=runID, with their command lines.
func processesOfRun(runID string) []string {
	want := []byte(repro.MarkerVar + "=" + runID)
	names, _ := os.ReadDir("/proc")
	var out []string
	for _, n := range names {
		pid, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", n.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(e []byte) bool { return bytes.Equal(e, want) }) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", n.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // exited, waiting to be reaped
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", n.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	return out
}

// brokerClosed are the connections the broker closed.
func brokerClosed(res *repro.CommandResult) []*repro.Conn {
	var out []*repro.Conn
	for _, c := range res.Connections {
		if c.ClosedBy == "broker" {
			out = append(out, c)
		}
	}
	return out
}

// checkReproAsCatalog: kdiag names the client, and its verdict is what the
// catalog says the client does with the broker's close.
func checkReproAsCatalog(t *testing.T, c reproCase, res *repro.CommandResult) {
	t.Helper()
	if res.Client.Library != c.lib || (c.version != "" && res.Client.Version != c.version) {
		t.Errorf("kdiag names the client %s, want %s %s", res.Client, c.lib, c.version)
	}
	lib, ok := clients.Lookup(c.lib)
	if !ok {
		t.Fatalf("%s is not in the catalog", c.lib)
	}
	closed := brokerClosed(res)
	if len(closed) == 0 {
		t.Fatalf("the broker closed none of its connections: %s", res.Verdict)
	}
	holds := lib.HoldsIdleCloseWait() || c.blocked
	switch {
	case holds && (res.Status != repro.StatusHeld || res.ExitCode != 1):
		t.Errorf("the catalog says %s holds the broker's closes (reads idle connections %v, blocked %v); kdiag says %s (exit %d)",
			c.lib, lib.ReadsIdle, c.blocked, res.Verdict, res.ExitCode)
	case !holds && (res.Status != repro.StatusOK || res.ExitCode != 0):
		t.Errorf("the catalog says %s reads idle connections and closes on the FIN; kdiag says %s (exit %d)", c.lib, res.Verdict, res.ExitCode)
	}
	// A client that reads every connection closes each at once; one that
	// does not may still close one soon, when it writes on it again
	// (kafka-go refreshes its metadata every 6 s): the status says it held.
	for _, conn := range closed {
		if !holds && conn.Outcome != repro.OutcomeClosedAtOnce {
			t.Errorf("connection %s: %s, but the catalog says %s reads idle connections", conn, conn.Outcome, c.lib)
		}
	}
	if c.blocked {
		if res.Threads == nil || len(res.Threads.Network) == 0 || res.Threads.Network[0].State != clients.Blocked {
			t.Errorf("a send callback blocked the network thread, kdiag says its threads were %+v", res.Threads)
		}
		if !strings.Contains(res.Verdict, "was blocked in") {
			t.Errorf("the verdict %q does not say the network thread was blocked", res.Verdict)
		}
	}
	if holds && (res.Fix != lib.Fix || res.Fix == "") {
		t.Errorf("the fix %q is not the catalog's for %s", res.Fix, c.lib)
	}
}

// measuredResult says what the client did, in words that do not change
// from run to run: for a client that closed them, that it did at once and
// whether it reconnected; for one that held them, the Recv-Q of the
// sockets it held past --max-hold and, when a callback blocked its
// network thread, what the thread did and that it closed them once the
// callback returned. (When a holder let go of a socket depends on when it
// next wrote on it, or its reaper, against the run's end: the catalog's
// Ends says what ends it.)
func measuredResult(c reproCase, res *repro.CommandResult) string {
	var held []*repro.Conn
	reconnected := false
	for _, conn := range brokerClosed(res) {
		if conn.Held {
			held = append(held, conn)
		}
		reconnected = reconnected || conn.ReconnectMS >= 0
	}
	if res.Status == repro.StatusOK {
		s := "closed every connection the broker closed at once (within 1 s)"
		if reconnected {
			return s + ", and reconnected"
		}
		return s + ", and did not reconnect (nothing to send)"
	}
	recvQ, closedLater := map[uint32]bool{}, 0
	for _, conn := range held {
		recvQ[conn.RecvQ] = true
		if conn.Outcome == repro.OutcomeClosedLater {
			closedLater++
		}
	}
	q := ""
	if len(recvQ) == 1 && recvQ[1] {
		q = " (Recv-Q 1: the FIN unread)"
	}
	s := "held the connections the broker closed in CLOSE_WAIT" + q + " past --max-hold"
	if c.blocked && res.Threads != nil && len(res.Threads.Network) > 0 {
		n := res.Threads.Network[0]
		s += fmt.Sprintf(" while a send callback blocked its network thread (%s in %s)", n.State, n.SyscallName)
		if closedLater == len(held) {
			s += ", and closed them once it returned"
		}
	}
	return s
}

// measuredMu serializes the read-modify-write of measured.json.
var measuredMu sync.Mutex

// checkMeasuredCurrent: measured.json holds this run's verdict for the
// client; with -update-measured it is written there.
func checkMeasuredCurrent(t *testing.T, c reproCase, res *repro.CommandResult) {
	t.Helper()
	version := res.Client.Version
	if res.Client.Binding != "" && c.setup == "" {
		c.setup = res.Client.Binding
	}
	got := clients.ReproMeasurement{Library: c.lib, Version: version, Setup: c.setup, Blocked: c.blocked,
		Status: res.Status, Result: measuredResult(c, res), Command: c.command}
	measuredMu.Lock()
	defer measuredMu.Unlock()
	path := filepath.Join("..", clients.MeasuredFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ms []clients.ReproMeasurement
	if err := json.Unmarshal(b, &ms); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	i := slices.IndexFunc(ms, func(m clients.ReproMeasurement) bool { return m.Key() == got.Key() })
	if *updateMeasured {
		if i >= 0 {
			ms[i] = got
		} else {
			ms = append(ms, got)
		}
		slices.SortFunc(ms, func(a, b clients.ReproMeasurement) int { return strings.Compare(a.Key(), b.Key()) })
		out, err := json.MarshalIndent(ms, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	switch {
	case i < 0:
		t.Errorf("%s has no row for %s: run go test ./clients/ -run TestRepro -update-measured, then go generate ./clients/", clients.MeasuredFile, got.Key())
	case ms[i] != got:
		t.Errorf("%s says %+v, this run %+v: run go test ./clients/ -run TestRepro -update-measured, then go generate ./clients/", clients.MeasuredFile, ms[i], got)
	}
}

// TestReproMeasuredFile: measured.json parses, is sorted, names catalog
// libraries, and each row agrees with what the catalog says the library
// does (as checkMeasured holds the catalog's own rows).
func TestReproMeasuredFile(t *testing.T) {
	ms, err := clients.ReproMeasurements()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("measured.json is empty")
	}
	if !slices.IsSortedFunc(ms, func(a, b clients.ReproMeasurement) int { return strings.Compare(a.Key(), b.Key()) }) {
		t.Error("measured.json is not sorted by library, version and setup")
	}
	for _, m := range ms {
		lib, ok := clients.Lookup(m.Library)
		if !ok {
			t.Errorf("%s: not in the catalog", m.Key())
			continue
		}
		if want := !lib.ReadsIdle || m.Blocked; (m.Status == repro.StatusHeld) != want || m.Result == "" || m.Command == "" {
			t.Errorf("%s: %+v, but the catalog says it reads idle connections=%v", m.Key(), m, lib.ReadsIdle)
		}
		found := false
		for _, cm := range lib.Measured {
			found = found || (cm.Version == m.Version && cm.Setup == m.Setup && cm.Result == m.Result)
		}
		if !found {
			t.Errorf("%s: not among the catalog's measured rows of %s", m.Key(), m.Library)
		}
	}
}

func TestReproKcat(t *testing.T) {
	kc, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (Debian package kcat; .ci/run installs it)")
	}
	// kcat -P under a shell that writes one record and keeps the pipe
	// open: the shell's child holds the sockets. -E: kcat goes on when
	// every broker connection is down (the driven close takes them all)
	// instead of exiting on librdkafka's ALL_BROKERS_DOWN.
	runReproCase(t, reproCase{lib: clients.Librdkafka, version: "", setup: "kcat -P -E",
		command: "bash -c '(echo one; sleep 600) | kcat -E -b {bootstrap} -P -t live'",
		args:    []string{"bash", "-c", "(echo one; sleep 600) | " + kc + " -E -b {bootstrap} -P -t live"}})
}

func TestReproKafkaPython(t *testing.T) {
	py := python(t, "kafka")
	script := filepath.Join(t.TempDir(), "producer.py")
	if err := os.WriteFile(script, []byte(kafkaPythonSource), 0o644); err != nil {
		t.Fatal(err)
	}
	runReproCase(t, reproCase{lib: clients.KafkaPython, version: "2.0.2", command: "python3 producer.py {bootstrap} (kafka-python)",
		args: []string{py, script, "{bootstrap}"}})
}

func TestReproConfluentKafkaPython(t *testing.T) {
	py := python(t, "confluent_kafka")
	script := filepath.Join(t.TempDir(), "producer.py")
	if err := os.WriteFile(script, []byte(confluentKafkaPythonSource), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runReproCase(t, reproCase{lib: clients.Librdkafka, command: "python3 producer.py {bootstrap} (confluent-kafka-python, polling)",
		args: []string{py, script, "{bootstrap}"}})
	if !strings.HasPrefix(res.Client.Binding, "confluent-kafka-python") {
		t.Errorf("kdiag says %+v, want librdkafka loaded by confluent-kafka-python", res.Client)
	}
}

func TestReproKafkaJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	root, _ := exec.Command("npm", "root", "-g").Output()
	nodePath := strings.TrimSpace(string(root))
	check := exec.Command(node, "-e", "require('kafkajs')")
	check.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	if check.Run() != nil {
		t.Skip("kafkajs not installed (npm install -g kafkajs@2.2.4; .ci/run installs it)")
	}
	script := filepath.Join(t.TempDir(), "producer.js")
	if err := os.WriteFile(script, []byte(kafkaJSSource), 0o644); err != nil {
		t.Fatal(err)
	}
	runReproCase(t, reproCase{lib: clients.KafkaJS, version: "2.2.4", command: "node producer.js {bootstrap} (KafkaJS)",
		args: []string{node, script, "{bootstrap}"}, env: []string{"NODE_PATH=" + nodePath}})
}

func TestReproFranzGo(t *testing.T) {
	bin := goClient(t, "franz", "github.com/twmb/franz-go@v1.22.3", franzSource)
	runReproCase(t, reproCase{lib: clients.FranzGo, version: "v1.22.3", setup: "kgo.ConnIdleTimeout(10 * time.Minute)",
		command: "franz {bootstrap} (a kgo.Client producing once)", args: []string{bin, "{bootstrap}"}})
}

// TestReproFranzGoDefaults: with its defaults franz-go holds the broker's
// closes until its reaper, 1x to 2x ConnIdleTimeout (30 s) after the last
// use: the run watches past 60 s.
func TestReproFranzGoDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("watches franz-go for 75s")
	}
	bin := goClient(t, "franzdefaults", "github.com/twmb/franz-go@v1.22.3", franzDefaults)
	runReproCase(t, reproCase{lib: clients.FranzGo, version: "v1.22.3", setup: "defaults (ConnIdleTimeout 30 s)",
		command: "franz {bootstrap} (a kgo.Client with its defaults, producing once)", args: []string{bin, "{bootstrap}"},
		duration: 75 * time.Second})
}

func TestReproSarama(t *testing.T) {
	bin := goClient(t, "sarama", "github.com/IBM/sarama@v1.61.1", saramaSource)
	runReproCase(t, reproCase{lib: clients.Sarama, version: "v1.61.1", command: "sarama {bootstrap} (a SyncProducer sending once)",
		args: []string{bin, "{bootstrap}"}})
}

func TestReproKafkaGo(t *testing.T) {
	bin := goClient(t, "kafkago", "github.com/segmentio/kafka-go@v0.4.51", kafkaGoSource)
	runReproCase(t, reproCase{lib: clients.KafkaGo, version: "v0.4.51", setup: "Transport.IdleTimeout 10m",
		command: "kafkago {bootstrap} (a Writer writing once)", args: []string{bin, "{bootstrap}"}})
}

// javaIdle is a Java producer for kdiag repro: `Idle BOOTSTRAP TOPIC
// BLOCK [key=value...]` sends one record and, with BLOCK (seconds) above
// 0, a second one whose callback sleeps that long on the network thread;
// then it idles until killed. It compiles against both versions' API.
const javaIdle = `import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class Idle {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            p.put(kv[0], kv[1]);
        }
        final long block = Long.parseLong(args[2]) * 1000;
        KafkaProducer<String, String> producer = new KafkaProducer<String, String>(p);
        producer.send(new ProducerRecord<String, String>(args[1], "one")).get();
        System.out.println("sent");
        if (block > 0) {
            producer.send(new ProducerRecord<String, String>(args[1], "two"), (md, e) -> {
                System.out.println("blocking");
                try { Thread.sleep(block); } catch (InterruptedException ie) { }
                System.out.println("released");
            });
        }
        Thread.sleep(Long.MAX_VALUE);
    }
}
`

// TestReproJava runs kafka-clients 2.1.1 and 3.9.0 with their network
// thread polling (closed at once, reconnected: no CLOSE_WAIT), and with a
// send callback that sleeps 12 s on it (every connection the broker closed
// meanwhile held in CLOSE_WAIT, then closed once it returns). The callback
// starts blocking just after the first record, and the driven closes come
// every 3 s, so one comes while it blocks, whatever the JVM's pace.
func TestReproJava(t *testing.T) {
	for _, v := range javaVersions {
		for _, block := range []int{0, 12} {
			name, setup := v.version+"/polling", "network thread polling"
			if block > 0 {
				name, setup = v.version+"/blocking-callback", fmt.Sprintf("a send callback blocking the network thread %d s", block)
			}
			t.Run(name, func(t *testing.T) {
				java, cp := javaProgramFor(t, v.version, "Idle", javaIdle)
				runReproCase(t, reproCase{lib: clients.KafkaClients, version: v.version, setup: setup, blocked: block > 0,
					command: fmt.Sprintf("java -cp kafka-clients-%s.jar:... Idle {bootstrap} live %d", v.version, block),
					args:    []string{java, "-Xmx128m", "-cp", cp, "Idle", "{bootstrap}", "live", strconv.Itoa(block)}})
			})
		}
	}
}

// javaPeriodic is a Java producer for the repro scenarios' configurations:
// `Periodic BOOTSTRAP TOPIC INTERVAL_MS BLOCK [key=value...]` sends a record
// every INTERVAL_MS until killed; with BLOCK (seconds) above 0, the first
// record's callback sleeps that long on the network thread.
const javaPeriodic = `import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class Periodic {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        for (int i = 4; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            p.put(kv[0], kv[1]);
        }
        long interval = Long.parseLong(args[2]);
        final long block = Long.parseLong(args[3]) * 1000;
        KafkaProducer<String, String> producer = new KafkaProducer<String, String>(p);
        for (int i = 0; ; i++) {
            final boolean blocks = i == 0 && block > 0;
            producer.send(new ProducerRecord<String, String>(args[1], "message " + i), (md, e) -> {
                if (blocks) {
                    try { Thread.sleep(block); } catch (InterruptedException ie) { }
                }
            });
            Thread.sleep(interval);
        }
    }
}
`

// TestReproScenariosAsJava: each kdiag repro scenario that stands for
// kafka-clients 3.9.0 (healthy, never-idle, stalled-callback: its
// reference producer follows that client) gets the verdict the real
// 3.9.0 client gets in the same configuration: the scenario's settings at
// the default scale, a record every scaled interval, three brokers closing
// connections idle 3 s on their own timer (--broker-closes idle, as the
// scenarios run). The scenarios that show CLOSE_WAIT only while blocked or
// none at all must be OK (or, for stalled-callback, HELD while its network
// thread is blocked) with the jar too.
func TestReproScenariosAsJava(t *testing.T) {
	idle := repro.RealBrokerIdle / repro.DefaultScale
	for _, sc := range repro.Catalog() {
		if !strings.HasPrefix(sc.StandsFor, "kafka-clients 3.9.0") {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			java, cp := javaProgramFor(t, "3.9.0", "Periodic", javaPeriodic)
			block := 0
			if sc.BlockCallbacks {
				block = 8 // longer than the broker's idle timeout (3 s), as the scenario's stall
			}
			args := []string{java, "-Xmx128m", "-cp", cp, "Periodic", "{bootstrap}", repro.DefaultTopic,
				strconv.FormatInt(repro.Scale(sc.Interval, idle).Milliseconds(), 10), strconv.Itoa(block)}
			settings := sc.Settings(idle)
			keys := make([]string, 0, len(settings))
			for k := range settings {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				args = append(args, k+"="+settings[k])
			}
			res, code, stderr := runRepro(t, reproCase{args: args, duration: 15 * time.Second,
				flags: []string{"--brokers", "3", "--topic", repro.DefaultTopic, "--broker-closes", "idle", "--broker-idle", idle.String()}})
			t.Logf("%s with kafka-clients 3.9.0 (%v): exit %d: %s", sc.Name, settings, code, res.Verdict)
			for _, conn := range res.Connections {
				t.Logf("  %s closed by %q after %dms idle, outcome %q, CLOSE_WAIT %dms", conn, conn.ClosedBy, conn.IdleMS, conn.Outcome, conn.CloseWaitMS)
			}
			if res.Client.Library != clients.KafkaClients || res.Client.Version != "3.9.0" {
				t.Errorf("kdiag names the client %s", res.Client)
			}
			switch sc.Expect {
			case repro.ExpectWhileBlocked:
				if res.Status != repro.StatusHeld || res.Threads == nil || len(res.Threads.Network) == 0 || res.Threads.Network[0].State != clients.Blocked {
					t.Errorf("scenario %s expects %q; the real client: %s (threads %+v); stderr:\n%s", sc.Name, sc.Expect, res.Verdict, res.Threads, stderr)
				}
			default:
				if res.Status != repro.StatusOK {
					t.Errorf("scenario %s expects %q; the real client: %s; stderr:\n%s", sc.Name, sc.Expect, res.Verdict, stderr)
				}
				for _, conn := range brokerClosed(res) {
					if conn.Outcome != repro.OutcomeClosedAtOnce {
						t.Errorf("%s: %s, want each FIN read at once", conn, conn.Outcome)
					}
				}
			}
		})
	}
}

// TestReproNetNSFranzGo: with --netns (root), franz-go's held CLOSE_WAIT
// turns into held CLOSE within 30 s of the broker's close: the
// namespace's tcp_fin_timeout (2 s) ends the broker's side, and Go's first
// keepalive probe, 15 s after the connection's last use, draws a reset.
func TestReproNetNSFranzGo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--netns needs root")
	}
	bin := goClient(t, "franz", "github.com/twmb/franz-go@v1.22.3", franzSource)
	res, code, stderr := runRepro(t, reproCase{args: []string{bin, "{bootstrap}"}, duration: 30 * time.Second, flags: []string{"--netns"}})
	t.Logf("exit %d: %s", code, res.Verdict)
	if !res.NetNS || res.Client.Library != clients.FranzGo {
		t.Fatalf("netns %v, client %s; stderr:\n%s", res.NetNS, res.Client, stderr)
	}
	first := res.FirstHeldClose()
	if first == nil {
		t.Fatalf("no connection held in CLOSE: %s", res.Verdict)
	}
	if d := time.Duration(first.HeldCloseAtMS-first.ClosedMS) * time.Millisecond; d > 30*time.Second {
		t.Errorf("held CLOSE %v after the broker's close, want within 30s", d)
	}
	if code != 1 || !strings.Contains(res.Verdict, "then CLOSE after keepalive's reset") {
		t.Errorf("exit %d: %s", code, res.Verdict)
	}
}
