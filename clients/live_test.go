package clients_test

// The clients test: real third-party Kafka clients against kdiag's broker
// (package broker, on 127.0.0.1, closing connections idle for 3 s), each
// checked for what it leaves after the broker's idle close and for what
// kdiag doctor says of it: client and version, instances, diagnosis. Each
// waits for the state it checks, with a bound, and never races a client's
// own idle timer: the Go clients that hold CLOSE_WAIT are given a 10-minute
// idle timeout, and the clients that close on the FIN are checked once the
// broker has closed and their sockets have settled.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
)

const idle = 3 * time.Second

func startBroker(t *testing.T) *broker.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := broker.Start(ctx, broker.Config{Brokers: 1, Ports: []int{0}, Idle: idle, Topics: []string{"live"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// client is a running client process that prints "sent" once it has
// produced one record, then idles until killed.
type client struct {
	cmd  *exec.Cmd
	sent chan struct{}
	out  *strings.Builder
	// in is the client's stdin: a client that reads it produces again on
	// each line (poke).
	in io.WriteCloser
}

// poke asks the client to produce one more record, when it reads stdin.
func (c *client) poke(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.in, "again\n"); err != nil {
		t.Fatalf("poking the client: %v", err)
	}
}

func start(t *testing.T, env []string, name string, args ...string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, killed whole: kcat's test runs it under a
	// shell whose children hold the pipes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &client{cmd: cmd, sent: make(chan struct{}), out: &errOut, in: stdin}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "sent" {
				close(c.sent)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-c.sent:
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not produce within 90s; stderr:\n%s", name, errOut.String())
	}
	return c
}

// closeWait counts pid's CLOSE_WAIT and ESTABLISHED sockets to the broker.
func states(t *testing.T, pid int, c *broker.Cluster) (cw, est int) {
	t.Helper()
	br, err := netstat.ParseBrokers(c.BootstrapServers())
	if err != nil {
		t.Fatal(err)
	}
	s, err := netstat.NewScanner("/proc").Scan(context.Background(), netstat.Query{PIDs: []int{pid}, Brokers: br,
		States: netstat.States(netstat.CloseWait, netstat.Established)})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range s.Sockets {
		switch k.State {
		case netstat.CloseWait:
			cw++
		case netstat.Established:
			est++
		}
	}
	return cw, est
}

func runDoctor(t *testing.T, pid int, c *broker.Cluster) doctor.Process {
	t.Helper()
	br, err := netstat.ParseBrokers(c.BootstrapServers())
	if err != nil {
		t.Fatal(err)
	}
	r, err := doctor.Run(context.Background(), doctor.Options{Query: netstat.Query{PIDs: []int{pid}, Brokers: br}, StuckAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Processes) != 1 || r.Processes[0].PID != pid {
		t.Fatalf("doctor --pid %d: %+v", pid, r.Processes)
	}
	return r.Processes[0]
}

func findingIDs(p doctor.Process) []string {
	var ids []string
	for _, f := range p.Findings {
		ids = append(ids, f.ID)
		for _, c := range f.Causes {
			ids = append(ids, f.ID+"/"+c.ID)
		}
	}
	return ids
}

func has(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// checkReader: a client that reads idle connections closes on the FIN: once
// the broker has closed idle connections, its sockets to the broker leave
// CLOSE_WAIT and stay out, doctor's first look (no --pid) does not warn of
// it, and doctor --pid names it and finds no CLOSE_WAIT.
func checkReader(t *testing.T, c *broker.Cluster, cl *client, lib, version string) doctor.Process {
	t.Helper()
	pid := cl.cmd.Process.Pid
	testio.WaitFor(t, 30*time.Second, "the broker closes an idle connection", func() bool { return c.Stats().ClosedIdle >= 1 })
	testio.WaitFor(t, 20*time.Second, "no CLOSE_WAIT left", func() bool { cw, _ := states(t, pid, c); return cw == 0 })
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		if cw, _ := states(t, pid, c); cw != 0 {
			t.Fatalf("%s holds %d CLOSE_WAIT after it had none", lib, cw)
		}
	}
	r, _ := firstLook(t, "--brokers", c.BootstrapServers())
	checkFirstLookQuiet(t, r, pid, lib)
	p := runDoctor(t, pid, c)
	if p.Client.Library != lib || (version != "" && p.Client.Version != version) {
		t.Errorf("doctor names the client %+v, want %s %s", p.Client, lib, version)
	}
	if ids := findingIDs(p); has(ids, "close-wait-held") || has(ids, "close-wait-growing") {
		t.Errorf("doctor finds CLOSE_WAIT in a client that closed it: %v", ids)
	}
	t.Logf("%s after the broker's idle close (broker %+v): doctor: %s, instances %v, sockets %v, findings %v",
		lib, c.Stats().Counts, p.Client, p.Instances, p.Sockets, findingIDs(p))
	return p
}

// checkHolder: a client that does not read idle connections holds every
// connection the broker closed in CLOSE_WAIT, and doctor's first look (no
// --pid, the default --stuck-age, however young the sockets) warns of it in
// the client's own terms. A client whose reaper may close them first
// (franz-go's defaults: 1x to 2x 30 s after the last use) is poked to
// produce again if the first look found them gone, so that the test never
// depends on beating the reaper.
func checkHolder(t *testing.T, c *broker.Cluster, cl *client, lib, version, fixWord string, reaps bool) {
	t.Helper()
	pid := cl.cmd.Process.Pid
	var (
		r    *doctor.Report
		code int
	)
	for attempt := 1; ; attempt++ {
		testio.WaitFor(t, 30*time.Second, "the broker closes every idle connection", func() bool {
			s := c.Stats()
			return s.ClosedIdle >= 1 && s.Open == 0
		})
		testio.WaitFor(t, 10*time.Second, "the client's sockets reach CLOSE_WAIT", func() bool {
			cw, est := states(t, pid, c)
			return cw >= 1 && est == 0
		})
		r, code = firstLook(t, "--brokers", c.BootstrapServers())
		if p := reportOf(r, pid); !reaps || attempt == 3 || p != nil && p.Sockets["CLOSE_WAIT"] > 0 {
			break
		}
		t.Logf("attempt %d: %s's reaper closed the sockets before the first look; producing again", attempt, lib)
		cl.poke(t)
	}
	checkFirstLookHolds(t, r, code, pid, lib, version, "close-wait-held", fixWord)
	ids := findingIDs(*reportOf(r, pid))
	if !has(ids, "close-wait-held/client-does-not-read-idle") {
		t.Errorf("first look's findings %v, want close-wait-held caused by client-does-not-read-idle", ids)
	}
	cw, _ := states(t, pid, c)
	t.Logf("%s after the broker's idle close: %d CLOSE_WAIT held (broker %+v); first look: %v", lib, cw, c.Stats().Counts, ids)
}

func TestLiveKcat(t *testing.T) {
	kc, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (Debian package kcat; .ci/run installs it)")
	}
	c := startBroker(t)
	// kcat -P reads records from a shell that writes one and then keeps
	// the pipe open; "sent" comes once kcat has delivered (-D is not
	// needed: the delivery report is kcat's exit, so a second process
	// consumes it back instead).
	script := fmt.Sprintf(`(echo one; sleep 600) | %s -b %s -P -t live & while ! %s -b %s -C -t live -c 1 -e -q >/dev/null 2>&1; do sleep 0.2; done; echo sent; wait`,
		kc, c.BootstrapServers(), kc, c.BootstrapServers())
	cl := start(t, nil, "bash", "-c", script)
	pgrep := func() int {
		out, _ := exec.Command("pgrep", "-P", fmt.Sprint(cl.cmd.Process.Pid), "-x", "kcat").Output()
		var pid int
		fmt.Sscan(string(out), &pid)
		return pid
	}
	var pid int
	testio.WaitFor(t, 10*time.Second, "kcat -P running", func() bool { pid = pgrep(); return pid > 0 })
	p := checkReader(t, c, &client{cmd: &exec.Cmd{Process: &os.Process{Pid: pid}}}, clients.Librdkafka, "")
	if !strings.HasPrefix(p.Client.Binding, "kcat") || p.Client.Version == "" {
		t.Errorf("kcat: doctor says %+v, want librdkafka with its version, loaded by kcat", p.Client)
	}
	if p.Instances == nil || *p.Instances != 1 {
		t.Errorf("kcat: %v instances (rdk:main threads), want 1", p.Instances)
	}
}

func python(t *testing.T, module string) string {
	t.Helper()
	py := "/usr/bin/python3" // Debian's, whose dist-packages hold python3-kafka and python3-confluent-kafka
	if err := exec.Command(py, "-c", "import "+module).Run(); err != nil {
		t.Skipf("%s cannot import %s (Debian packages python3-kafka and python3-confluent-kafka; .ci/run installs them)", py, module)
	}
	return py
}

func TestLiveKafkaPython(t *testing.T) {
	py := python(t, "kafka")
	c := startBroker(t)
	script := filepath.Join(t.TempDir(), "producer.py")
	os.WriteFile(script, []byte(kafkaPythonSource), 0o644)
	cl := start(t, nil, py, script, c.BootstrapServers())
	checkReader(t, c, cl, clients.KafkaPython, "2.0.2")
}

func TestLiveConfluentKafkaPython(t *testing.T) {
	py := python(t, "confluent_kafka")
	c := startBroker(t)
	script := filepath.Join(t.TempDir(), "producer.py")
	os.WriteFile(script, []byte(confluentKafkaPythonSource), 0o644)
	cl := start(t, nil, py, script, c.BootstrapServers())
	p := checkReader(t, c, cl, clients.Librdkafka, "")
	if !strings.HasPrefix(p.Client.Binding, "confluent-kafka-python") {
		t.Errorf("doctor says %+v, want librdkafka loaded by confluent-kafka-python", p.Client)
	}
}

func TestLiveKafkaJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	root, err := exec.Command("npm", "root", "-g").Output()
	nodePath := strings.TrimSpace(string(root))
	if err != nil || exec.Command(node, "-e", "require('kafkajs')").Run() != nil && func() bool {
		cmd := exec.Command(node, "-e", "require('kafkajs')")
		cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
		return cmd.Run() != nil
	}() {
		t.Skip("kafkajs not installed (npm install -g kafkajs@2.2.4; .ci/run installs it)")
	}
	c := startBroker(t)
	script := filepath.Join(t.TempDir(), "producer.js")
	os.WriteFile(script, []byte(kafkaJSSource), 0o644)
	cl := start(t, []string{"NODE_PATH=" + nodePath}, node, script, c.BootstrapServers())
	checkReader(t, c, cl, clients.KafkaJS, "2.2.4")
}

// goClients builds the Go clients' producers from the module proxy into a
// temporary module, once.
func goClient(t *testing.T, name, mod, src string) string {
	t.Helper()
	goBin, err := testbin.GoBinary()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module live\n\ngo 1.24\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644)
	for _, args := range [][]string{{"get", mod}, {"mod", "tidy"}, {"build", "-o", name, "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("building the %s producer (go %s) needs the module proxy: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, name)
}

// franzSource is a franz-go producer with a 10-minute idle timeout, far
// above the broker's 3 s: the test must not race its reaper.
const franzSource = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(os.Args[1]), kgo.DefaultProduceTopic("live"), kgo.ConnIdleTimeout(10*time.Minute))
	if err != nil {
		panic(err)
	}
	if err := cl.ProduceSync(context.Background(), kgo.StringRecord("one")).FirstErr(); err != nil {
		panic(err)
	}
	fmt.Println("sent")
	time.Sleep(10 * time.Minute)
}
`

func TestLiveFranzGo(t *testing.T) {
	bin := goClient(t, "franz", "github.com/twmb/franz-go@v1.22.3", franzSource)
	c := startBroker(t)
	checkHolder(t, c, start(t, nil, bin, c.BootstrapServers()), clients.FranzGo, "v1.22.3", "kgo.ConnIdleTimeout", false)
}

// saramaSource is a Sarama sync producer with the defaults.
const saramaSource = `package main

import (
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
)

func main() {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer([]string{os.Args[1]}, cfg)
	if err != nil {
		panic(err)
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "live", Value: sarama.StringEncoder("one")}); err != nil {
		panic(err)
	}
	fmt.Println("sent")
	time.Sleep(10 * time.Minute)
}
`

func TestLiveSarama(t *testing.T) {
	bin := goClient(t, "sarama", "github.com/IBM/sarama@v1.61.1", saramaSource)
	c := startBroker(t)
	checkHolder(t, c, start(t, nil, bin, c.BootstrapServers()), clients.Sarama, "v1.61.1", "Sarama has no idle timeout", false)
}

func TestLiveKafkaGo(t *testing.T) {
	bin := goClient(t, "kafkago", "github.com/segmentio/kafka-go@v0.4.51", kafkaGoSource)
	c := startBroker(t)
	checkHolder(t, c, start(t, nil, bin, c.BootstrapServers()), clients.KafkaGo, "v0.4.51", "Transport.IdleTimeout", false)
}

// franzDefaults is a franz-go producer with the library's defaults
// (ConnIdleTimeout 30 s): it produces one record, then one more for each
// line on stdin.
const franzDefaults = `package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(os.Args[1]), kgo.DefaultProduceTopic("live"))
	if err != nil {
		panic(err)
	}
	produce := func() {
		if err := cl.ProduceSync(context.Background(), kgo.StringRecord("one")).FirstErr(); err != nil {
			panic(err)
		}
	}
	produce()
	fmt.Println("sent")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		produce()
	}
	time.Sleep(10 * time.Minute)
}
`

func TestLiveFranzGoDefaults(t *testing.T) {
	bin := goClient(t, "franzdefaults", "github.com/twmb/franz-go@v1.22.3", franzDefaults)
	c := startBroker(t)
	checkHolder(t, c, start(t, nil, bin, c.BootstrapServers()), clients.FranzGo, "v1.22.3", "kgo.ConnIdleTimeout", true)
}

// The clients' programs, shared with the repro tests (repro_test.go): each
// takes the bootstrap list as its first argument, produces one record to
// "live", prints "sent" and idles until killed.
const (
	kafkaPythonSource = `import sys, time
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1])
p.send("live", b"one").get(timeout=60)
print("sent", flush=True)
time.sleep(600)
`
	confluentKafkaPythonSource = `import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1]})
p.produce("live", b"one")
if p.flush(60) != 0:
    sys.exit("not delivered")
print("sent", flush=True)
while True:
    p.poll(1)
`
	kafkaJSSource = `const { Kafka, logLevel } = require('kafkajs')
const kafka = new Kafka({ brokers: [process.argv[2]], logLevel: logLevel.NOTHING })
const producer = kafka.producer()
;(async () => {
  await producer.connect()
  await producer.send({ topic: 'live', messages: [{ value: 'one' }] })
  console.log('sent')
  setInterval(() => {}, 1000)
})().catch(e => { console.error(e); process.exit(1) })
`
	kafkaGoSource = `package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	w := &kafka.Writer{Addr: kafka.TCP(os.Args[1]), Topic: "live",
		// Far above the broker's 3 s: the test must not race kafka-go's own idle close (30 s by default).
		Transport: &kafka.Transport{IdleTimeout: 10 * time.Minute, Dial: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("one")}); err != nil {
		panic(err)
	}
	fmt.Println("sent")
	time.Sleep(10 * time.Minute)
}
`
)
