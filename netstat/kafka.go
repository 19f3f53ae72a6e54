package netstat

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultKafkaPorts are the remote ports taken for Kafka brokers when no
// --brokers list is given: 9092 (PLAINTEXT), 9093 (SSL) and 9094 (the usual
// third listener).
var DefaultKafkaPorts = []uint16{9092, 9093, 9094}

// kafkaEvidence is what Kafka detection reads of a process.
type kafkaEvidence struct {
	procRoot string
	pid      int
	name     string
	args     []string
	// brokerSockets counts the process's matched sockets to brokers
	// (isBrokerSocket); haveBrokers says whether --brokers named them.
	brokerSockets int
	haveBrokers   bool
}

// kafkaReason says why a process is taken for a Kafka client, or "" when
// nothing says so. It tries, cheapest first: kafka-clients on a JVM's class
// path (-cp, -classpath, --class-path, -Djava.class.path, CLASSPATH); an
// open fd to a kafka-clients jar (a JVM keeps its class path jars open);
// librdkafka in /proc/<pid>/maps (librdkafka and every binding: confluent-
// kafka-go, -python, node-rdkafka, kcat); sockets to --brokers, or without a
// list to ports 9092-9094.
func kafkaReason(ev kafkaEvidence) string {
	if r := ownKafkaReason(ev); r != "" {
		return r
	}
	return brokerSocketsReason(ev)
}

// ownKafkaReason is what the process's own files say of kafkaReason (its
// class path, open jars, maps), "" when they say nothing: it does not
// change from scan to scan as its sockets do, and reading it can cost a
// readlink of every fd of a JVM (openKafkaJar), so a repeated scan keeps
// it (Scanner.kafkaOwn).
func ownKafkaReason(ev kafkaEvidence) string {
	if jar := classPathKafkaJar(ev.args, ev.procRoot, ev.pid); jar != "" {
		return "kafka-clients on class path (" + jar + ")"
	}
	if isJVM(ev.name, ev.args) {
		if jar := openKafkaJar(ev.procRoot, ev.pid); jar != "" {
			return "kafka-clients jar open (" + jar + ")"
		}
	}
	if lib := mapsLibrdkafka(ev.procRoot, ev.pid); lib != "" {
		return "maps librdkafka (" + lib + ")"
	}
	return ""
}

// brokerSocketsReason is kafkaReason's last resort: the process's sockets
// to brokers.
func brokerSocketsReason(ev kafkaEvidence) string {
	if n := ev.brokerSockets; n > 0 {
		if ev.haveBrokers {
			return fmt.Sprintf("sockets to brokers (%d to --brokers)", n)
		}
		return fmt.Sprintf("sockets to brokers (%d to ports 9092-9094)", n)
	}
	return ""
}

// IsBroker returns whether a remote endpoint is a Kafka broker: one of
// brokers (--brokers), or without a list one on a DefaultKafkaPorts port.
// scan marks Kafka clients with it, and the analyzer its brokers.
func IsBroker(brokers []Endpoint) func(netip.AddrPort) bool {
	return func(ap netip.AddrPort) bool {
		if len(brokers) == 0 {
			return slices.Contains(DefaultKafkaPorts, ap.Port())
		}
		for _, b := range brokers {
			if b.Match(ap) {
				return true
			}
		}
		return false
	}
}

// isBrokerSocket reports whether s goes to a broker (IsBroker); listeners
// have no remote.
func isBrokerSocket(s Socket, brokers []Endpoint) bool {
	return s.State != Listen && IsBroker(brokers)(s.Remote)
}

func isJVM(name string, args []string) bool {
	if name == "java" {
		return true
	}
	return len(args) > 0 && filepath.Base(args[0]) == "java"
}

// classPathKafkaJar returns the kafka-clients jar named on the command line's
// class path or in the process's CLASSPATH, "" if none.
func classPathKafkaJar(args []string, procRoot string, pid int) string {
	var paths []string
	for i, a := range args {
		switch {
		case (a == "-cp" || a == "-classpath" || a == "--class-path") && i+1 < len(args):
			paths = append(paths, args[i+1])
		case strings.HasPrefix(a, "--class-path="):
			paths = append(paths, strings.TrimPrefix(a, "--class-path="))
		case strings.HasPrefix(a, "-Djava.class.path="):
			paths = append(paths, strings.TrimPrefix(a, "-Djava.class.path="))
		}
	}
	if isJVM("", args) || len(paths) == 0 {
		if env, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/environ"); err == nil {
			for _, kv := range bytes.Split(env, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("CLASSPATH=")); ok {
					paths = append(paths, string(v))
				}
			}
		}
	}
	for _, p := range paths {
		for _, el := range filepath.SplitList(p) {
			if isKafkaClientsJar(el) {
				return filepath.Base(el)
			}
		}
	}
	return ""
}

// isKafkaClientsJar matches kafka-clients.jar and kafka-clients-3.7.0.jar
// (and the shaded kafka-clients-3.7.0-ccs.jar of Confluent Platform).
func isKafkaClientsJar(path string) bool {
	b := filepath.Base(path)
	return strings.HasPrefix(b, "kafka-clients") && strings.HasSuffix(b, ".jar")
}

// openKafkaJar returns the base name of a kafka-clients jar the process has
// open, "" if none.
func openKafkaJar(procRoot string, pid int) string {
	dir := procRoot + "/" + strconv.Itoa(pid) + "/fd"
	f, err := os.Open(dir)
	if err != nil {
		return ""
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return ""
	}
	for _, n := range names {
		target, err := os.Readlink(dir + "/" + n)
		if err == nil && isKafkaClientsJar(target) {
			return filepath.Base(target)
		}
	}
	return ""
}

// mapsLibrdkafka returns the librdkafka file the process maps, from
// /proc/<pid>/maps, "" if none.
func mapsLibrdkafka(procRoot string, pid int) string {
	f, err := os.Open(procRoot + "/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	return parseMapsLibrdkafka(f)
}

// parseMapsLibrdkafka scans maps lines ("address perms offset dev inode
// pathname", proc(5)) for a pathname whose base starts with librdkafka.
func parseMapsLibrdkafka(r interface{ Read([]byte) (int, error) }) string {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.Index(line, []byte("librdkafka"))
		if i < 0 {
			continue
		}
		j := bytes.LastIndexByte(line[:i], ' ')
		path := string(line[j+1:])
		if strings.HasPrefix(filepath.Base(path), "librdkafka") {
			return filepath.Base(path)
		}
	}
	return ""
}

// ExplainRecvQ explains a CLOSE_WAIT socket's Recv-Q ("" for other states).
//
// Recv-Q is rcv_nxt - copied_seq (idiag_rqueue in net/ipv4/tcp_diag.c, the
// rx_queue of /proc/net/tcp in net/ipv4/tcp_ipv4.c): sequence numbers
// received but not yet read. The peer's FIN takes one sequence number, and
// tcp_recvmsg advances copied_seq past it only when a read reaches it. So in
// CLOSE_WAIT Recv-Q is the unread data plus 1 while the FIN itself is unread:
//
//   - 0: the application has read everything, FIN included, and has not
//     called close(). Usually read() returned 0 (EOF); a read that took the
//     last bytes can also consume a FIN queued behind them, so the
//     application may never have seen the EOF. Either way the socket is
//     leaked by the code that read it.
//   - 1: nothing but the FIN is unread: the application has not read since
//     the peer closed. Typical of clients that read only while a response is
//     pending (Sarama, franz-go, kafka-go) and of a blocked network thread.
//   - n > 1: n-1 bytes of data are unread before the FIN too: the
//     application stopped reading even before the peer closed.
//
// This was checked on real loopback sockets (netstat's TestRecvQCloseWait):
// FIN unread 1, FIN read 0, 5 bytes unread 6, 3 of 5 read 3. A claim that the
// FIN does not count in Recv-Q is wrong on Linux.
func ExplainRecvQ(s Socket) string {
	if s.State != CloseWait {
		return ""
	}
	switch {
	case s.RecvQ == 0:
		return "Recv-Q 0: the FIN was read (EOF) but the socket was never closed"
	case s.RecvQ == 1:
		return "Recv-Q 1: the FIN was never read; the application has not read since the peer closed"
	default:
		return fmt.Sprintf("Recv-Q %d: %d bytes of data unread before the FIN; the application stopped reading", s.RecvQ, s.RecvQ-1)
	}
}
