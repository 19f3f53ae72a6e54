package clients

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCatalog(t *testing.T) {
	ids := []string{}
	for _, l := range All() {
		ids = append(ids, l.ID)
		if l.Name == "" || l.Language == "" || l.Recognized == "" || l.CloseWait == "" || l.Fix == "" {
			t.Errorf("%s: name, language, recognized, close-wait meaning and fix are all required", l.ID)
		}
		facts := map[string]Fact{"reads": l.Reads, "idle": l.Idle, "keepalive": l.Keepalive}
		if l.Threads != nil {
			facts["threads"] = l.Threads.Fact
		}
		for i, v := range l.Lifecycle {
			if v.Topic == "" {
				t.Errorf("%s: lifecycle fact %d has no topic", l.ID, i)
			}
			facts[fmt.Sprintf("lifecycle %d (%s %s)", i, v.Versions, v.Topic)] = v.Fact
			// Each version it names is read at its own tag.
			tags := []string{v.Source.Tag}
			for j, a := range v.Also {
				checkFact(t, fmt.Sprintf("%s: lifecycle %d also %d", l.ID, i, j), Fact{Says: v.Says, Source: a})
				tags = append(tags, a.Tag)
			}
			for _, ver := range strings.Split(v.Versions, " and ") {
				if ver != "" && !slices.ContainsFunc(tags, func(tag string) bool { return strings.HasPrefix(tag, ver) }) {
					t.Errorf("%s: lifecycle %d holds for %s but was read at %q only", l.ID, i, ver, tags)
				}
			}
		}
		for _, v := range l.Variants {
			facts["variant "+v.Setting+"="+v.Value+" reads"] = v.Reads
			if v.Setting == "" || v.Value == "" || v.CloseWait == "" || v.Fix == "" || (!v.ReadsIdle && v.Ends == "") {
				t.Errorf("%s: variant %+v needs its setting, value, close-wait meaning and fix, and what ends the CLOSE_WAIT it holds", l.ID, v)
			}
			checkMeasured(t, l.ID+" "+v.Setting+"="+v.Value, v.Measured, v.ReadsIdle)
		}
		for what, f := range facts {
			checkFact(t, l.ID+": "+what, f)
		}
		if l.IdleSetting == "" && l.IdleDefault != 0 {
			t.Errorf("%s: an idle default without a setting", l.ID)
		}
		if l.Threads != nil && (l.Threads.Network == "" || len(l.Threads.Network) > 15 || len(l.Threads.Instance) > 15 || l.Threads.Fact.Source.Repo == "") {
			t.Errorf("%s: thread prefixes must be set, at most 15 bytes (TASK_COMM_LEN-1), with a source: %+v", l.ID, l.Threads)
		}
		if l.Core != "" {
			if _, ok := Lookup(l.Core); !ok {
				t.Errorf("%s: core %q is not in the catalog", l.ID, l.Core)
			}
		}
		for _, r := range l.Rules {
			if !regexp.MustCompile(`^KD\d{3}$`).MatchString(r) {
				t.Errorf("%s: rule %q is not a kdiag lint rule ID", l.ID, r)
			}
		}
		checkMeasured(t, l.ID, l.Measured, l.ReadsIdle)
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("catalog IDs not sorted and unique: %v", ids)
	}
	for _, id := range []string{KafkaClients, Librdkafka, ConfluentKafkaGo, FranzGo, Sarama, KafkaGo, KafkaPython, AIOKafka, KafkaJS, KdiagProduce} {
		if _, ok := Lookup(id); !ok {
			t.Errorf("library %s is not in the catalog", id)
		}
	}
}

// checkMeasured holds measurements against what the catalog says of the
// library: one that reads idle connections holds no CLOSE_WAIT unless the
// setup blocked its network thread; one that does not, holds them.
func checkMeasured(t *testing.T, what string, ms []Measurement, readsIdle bool) {
	t.Helper()
	for _, m := range ms {
		if m.Version == "" || m.Result == "" {
			t.Errorf("%s: measurement %+v needs a version and a result", what, m)
		}
		want := !readsIdle || m.Blocked
		if m.HoldsCloseWait != want {
			t.Errorf("%s: measured %q holds=%v (network thread blocked: %v), but the catalog says it reads idle connections=%v", what, m.Result, m.HoldsCloseWait, m.Blocked, readsIdle)
		}
	}
}

// checkFact requires a fact to say something and name where it can be
// checked: repository, path and commit; a fact about kdiag's own code
// (SelfRepo) names files of this tree, which must hold its symbols.
func checkFact(t *testing.T, what string, f Fact) {
	t.Helper()
	s := f.Source
	if f.Says == "" || s.Repo == "" || s.Path == "" {
		t.Errorf("%s: fact %+v: a fact says something and names its repo and path", what, f)
		return
	}
	if s.Repo != SelfRepo {
		if s.Commit == "" {
			t.Errorf("%s: fact %+v names no commit", what, f)
		}
		return
	}
	var src strings.Builder
	for _, p := range strings.Split(s.Path, ", ") {
		b, err := os.ReadFile(filepath.Join("..", p))
		if err != nil {
			t.Errorf("%s: source %s: %v", what, p, err)
			continue
		}
		src.Write(b)
	}
	for _, sym := range strings.Split(s.Symbol, ", ") {
		// "sender.connect (var d net.Dialer)": the symbol is the first word.
		sym, _, _ = strings.Cut(sym, " ")
		re := `\b` + regexp.QuoteMeta(sym) + `\b`
		if recv, name, ok := strings.Cut(sym, "."); ok {
			re = `func \(\w+ \*?` + regexp.QuoteMeta(recv) + `\) ` + regexp.QuoteMeta(name) + `\(`
		}
		if !regexp.MustCompile(re).MatchString(src.String()) {
			t.Errorf("%s: %s is not in %s", what, sym, s.Path)
		}
	}
}

// TestJavaCatalogVersions: the Java client's entry has what was measured
// of kafka-clients 2.1.1 and 3.9.0 (docs/clients.md's rows), its polling
// thread holding no CLOSE_WAIT and its blocked thread holding them, and
// the start-up facts of both, each read at its own tag.
func TestJavaCatalogVersions(t *testing.T) {
	java, _ := Lookup(KafkaClients)
	for _, v := range []string{"2.1.1", "3.9.0"} {
		var polling, blocked bool
		for _, m := range java.Measured {
			if m.Version != v || m.How == "" {
				continue
			}
			polling = polling || (!m.Blocked && !m.HoldsCloseWait)
			blocked = blocked || (m.Blocked && m.HoldsCloseWait)
		}
		if !polling || !blocked {
			t.Errorf("kafka-clients %s: measured polling without CLOSE_WAIT %v, blocked with %v; want both", v, polling, blocked)
		}
		var startup bool
		for _, f := range java.Lifecycle {
			if f.Versions == v && f.Topic == "start-up" {
				startup = strings.HasPrefix(f.Source.Tag, v)
			}
		}
		if !startup {
			t.Errorf("kafka-clients %s: no start-up fact read at its tag", v)
		}
	}
	for _, bad := range []string{"connections.max.idle.ms (540000) below", "create one KafkaProducer"} {
		if strings.Contains(java.Fix, bad) {
			t.Errorf("the Java fix says %q, which does not help a blocked network thread: %s", bad, java.Fix)
		}
	}
}

func TestParseMaps(t *testing.T) {
	in := `55d0c1a00000-55d0c1a02000 r--p 00000000 fe:01 1234   /usr/bin/python3.11
7f1c2a000000-7f1c2a100000 r-xp 00000000 fe:01 5678                       /usr/lib/x86_64-linux-gnu/librdkafka.so.1
7f1c2b000000-7f1c2b010000 r-xp 00000000 fe:01 999 /usr/lib/python3/dist-packages/confluent_kafka/cimpl.cpython-311-x86_64-linux-gnu.so
7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]
7ffd3000-7ffd4000 rw-p 00000000 00:00 0
`
	m, err := parseMaps(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := mapsInfo{librdkafka: "/usr/lib/x86_64-linux-gnu/librdkafka.so.1",
		confluentPython: "/usr/lib/python3/dist-packages/confluent_kafka/cimpl.cpython-311-x86_64-linux-gnu.so"}
	if m != want {
		t.Errorf("parseMaps = %+v, want %+v", m, want)
	}
	if _, err := parseMaps(strings.NewReader("7f00-7f01 r-xp\n")); err == nil || !strings.Contains(err.Error(), "maps line 1") {
		t.Errorf("a short line: err = %v, want one quoting line 1", err)
	}
}

func TestKafkaClientsJarVersion(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"kafka-clients-3.9.0.jar", "3.9.0", true},
		{"kafka-clients-7.7.0-ccs.jar", "7.7.0-ccs", true},
		{"kafka-clients.jar", "", true},
		{"kafka-clients-test-utils.jar", "", false},
		{"kafka-streams-3.9.0.jar", "", false},
		{"kafka-clients-3.9.0.pom", "", false},
	} {
		v, ok := kafkaClientsJarVersion(tc.name)
		if v != tc.want || ok != tc.ok {
			t.Errorf("kafkaClientsJarVersion(%q) = %q, %v; want %q, %v", tc.name, v, ok, tc.want, tc.ok)
		}
	}
}

func TestRdkafkaVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    elf.Machine
		code []byte
		want string
	}{
		{"x86-64 2.0.2", elf.EM_X86_64, []byte{0xb8, 0xff, 0x02, 0x00, 0x02, 0xc3}, "2.0.2"},
		{"x86-64 endbr64 2.3.0-RC3", elf.EM_X86_64, []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xb8, 0xcb, 0x00, 0x03, 0x02, 0xc3}, "2.3.0-RC3"},
		// movz w0, #0x2ff; movk w0, #0x200, lsl #16; ret
		{"arm64 2.0.2", elf.EM_AARCH64, le32(0x52800000|0x2ff<<5, 0x72a00000|0x200<<5, 0xd65f03c0), "2.0.2"},
		{"arm64 bti, 1.9.2", elf.EM_AARCH64, le32(0xd503245f, 0x52800000|0x2ff<<5, 0x72a00000|0x109<<5, 0xd65f03c0), "1.9.2"},
	} {
		v, err := decodeReturnConst(tc.m, tc.code)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := rdkafkaVersionString(v); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := decodeReturnConst(elf.EM_X86_64, []byte{0x55, 0x48, 0x89, 0xe5}); err == nil {
		t.Error("a function that is not mov eax, imm32; ret decoded")
	}
}

func le32(ins ...uint32) []byte {
	var b []byte
	for _, i := range ins {
		b = append(b, byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
	}
	return b
}

// TestRdkafkaVersionOfDebianLibrary reads the version of the librdkafka
// Debian installs (librdkafka1, which kcat and python3-confluent-kafka
// load) and compares it with dpkg's.
func TestRdkafkaVersionOfDebianLibrary(t *testing.T) {
	lib, err := filepath.Glob("/usr/lib/*-linux-gnu/librdkafka.so.1")
	if err != nil || len(lib) == 0 {
		t.Skip("librdkafka.so.1 not installed (Debian package librdkafka1, pulled in by kcat; .ci/run installs it)")
	}
	v, where, err := rdkafkaVersionOf(lib[0])
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/var/lib/dpkg/status")
	if err != nil {
		t.Skipf("no dpkg status to compare with: %v", err)
	}
	m := regexp.MustCompile(`(?m)^Package: librdkafka1\n(?:[^\n]+\n)*?Version: ([0-9.]+)`).FindSubmatch(status)
	if m == nil {
		t.Skip("dpkg does not list librdkafka1")
	}
	if v != string(m[1]) {
		t.Errorf("%s: version %s (%s), dpkg says %s", lib[0], v, where, m[1])
	}
}

func TestZipKafkaClients(t *testing.T) {
	nested := zipOf(t, map[string]string{versionProperties: "commitId=abc\nversion=3.8.1\n"})
	for _, tc := range []struct {
		name       string
		files      map[string]string
		entry, ver string
	}{
		{"spring boot", map[string]string{"BOOT-INF/lib/spring-kafka-3.2.0.jar": "", "BOOT-INF/lib/kafka-clients-3.7.1.jar": "x"}, "BOOT-INF/lib/kafka-clients-3.7.1.jar", "3.7.1"},
		{"war", map[string]string{"WEB-INF/lib/kafka-clients-3.9.0.jar": "x"}, "WEB-INF/lib/kafka-clients-3.9.0.jar", "3.9.0"},
		{"nested without version", map[string]string{"BOOT-INF/lib/kafka-clients.jar": string(nested)}, "BOOT-INF/lib/kafka-clients.jar", "3.8.1"},
		{"shaded", map[string]string{"org/apache/kafka/clients/producer/KafkaProducer.class": "", versionProperties: "version=4.0.0\n"}, versionProperties, "4.0.0"},
		{"none", map[string]string{"com/example/App.class": ""}, "", ""},
	} {
		b := zipOf(t, tc.files)
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		e, v, err := zipKafkaClients(zr)
		if err != nil || e != tc.entry || v != tc.ver {
			t.Errorf("%s: %q %q %v, want %q %q", tc.name, e, v, err, tc.entry, tc.ver)
		}
	}
}

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f, err := w.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(files[n]))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGoClientFromDeps(t *testing.T) {
	c, ok := goClientFromDeps(map[string]string{"github.com/IBM/sarama": "v1.61.1", "github.com/twmb/franz-go": "v1.22.3", "golang.org/x/sys": "v0.50.0"})
	want := Client{Library: FranzGo, Version: "v1.22.3", Language: "Go",
		Evidence: []string{"module github.com/twmb/franz-go v1.22.3", "also links github.com/IBM/sarama v1.61.1"}}
	if !ok || !cmp.Equal(c, want) {
		t.Errorf("goClientFromDeps: %v (-want +got):\n%s", ok, cmp.Diff(want, c))
	}
	if _, ok := goClientFromDeps(map[string]string{"github.com/spf13/cobra": "v1.10.2"}); ok {
		t.Error("a binary without a Kafka module identified")
	}
}

func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args                 []string
		script, code, module string
	}{
		{[]string{"python3", "-u", "-X", "dev", "app.py", "--flag"}, "app.py", "", ""},
		{[]string{"python3", "-c", "import kafka"}, "", "import kafka", ""},
		{[]string{"python3", "-m", "myapp.main"}, "", "", "myapp.main"},
		{[]string{"python3"}, "", "", ""},
	} {
		s, c, m := pythonArgs(tc.args)
		if s != tc.script || c != tc.code || m != tc.module {
			t.Errorf("pythonArgs(%q) = %q %q %q", tc.args, s, c, m)
		}
	}
	for _, tc := range []struct {
		args         []string
		script, code string
	}{
		{[]string{"node", "--max-old-space-size=512", "-r", "dotenv/config", "server.js"}, "server.js", ""},
		{[]string{"node", "-e", "require('kafkajs')"}, "", "require('kafkajs')"},
	} {
		s, c := nodeArgs(tc.args)
		if s != tc.script || c != tc.code {
			t.Errorf("nodeArgs(%q) = %q %q", tc.args, s, c)
		}
	}
	for _, tc := range []struct {
		src, want string
	}{
		{"import os\nfrom kafka import KafkaProducer\n", "kafka"},
		{"import pykafka\nimport kafkaesque\n", ""},
		{"  from aiokafka.producer import AIOKafkaProducer\n", "aiokafka"},
		{"import kafka.errors as e\n", "kafka"},
	} {
		m := pythonImport().FindStringSubmatch(tc.src)
		got := ""
		if m != nil {
			got = m[1] + m[2]
		}
		if got != tc.want {
			t.Errorf("python imports of %q: %q, want %q", tc.src, got, tc.want)
		}
	}
	for _, src := range []string{`const { Kafka } = require("kafkajs")`, `import { Kafka } from 'kafkajs'`, `await import('kafkajs')`} {
		if m := nodeImport().FindStringSubmatch(src); m == nil || m[1] != "kafkajs" {
			t.Errorf("node import of %q not found", src)
		}
	}
}

func TestParseSyscallAndStat(t *testing.T) {
	for in, want := range map[string]int{"running\n": -1, "-1 0x7ffd 0x7f00\n": -1, "232 0x5 0x7f 0x1 0xffffffff 0x0 0x0 0x7ffd 0x7f00\n": 232} {
		got, err := parseSyscall([]byte(in))
		if err != nil || got != want {
			t.Errorf("parseSyscall(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseSyscall([]byte("garbage")); err == nil {
		t.Error("parseSyscall accepted garbage")
	}
	st, err := parseStatState([]byte("42 (kafka-producer-) S 1 42 42 0 -1"))
	if err != nil || st != 'S' {
		t.Errorf("parseStatState = %c, %v", st, err)
	}
	st, err = parseStatState([]byte("42 (a) b (c)) R 1"))
	if err != nil || st != 'R' {
		t.Errorf("parseStatState with ) in the name = %c, %v", st, err)
	}
}

func TestClassify(t *testing.T) {
	java, _ := Lookup(KafkaClients)
	sample := func(sys1, sys2 int, st2 byte) []ThreadSample {
		return []ThreadSample{
			{TID: 10, Name: "java", State: 'S', Syscall: 202, HasSyscall: true},
			{TID: 11, Name: "kafka-producer-", State: 'S', Syscall: sys1, HasSyscall: true, Wchan: "do_epoll_wait"},
			{TID: 12, Name: "kafka-producer-", State: st2, Syscall: sys2, HasSyscall: true, Wchan: "futex_do_wait"},
		}
	}
	got := Classify(java, [][]ThreadSample{sample(202, 202, 'S'), sample(232, 202, 'S'), sample(202, 202, 'S')}, "amd64")
	// Thread 11 polled in one sample of three: polling, with the call and
	// wait channel of that sample.
	want := Threads{Samples: 3, Instances: 2, InstanceCounts: []int{2, 2, 2}, Network: []NetworkThread{
		{TID: 11, Name: "kafka-producer-", State: Polling, Syscall: 232, SyscallName: "epoll_wait", Wchan: "do_epoll_wait", Seen: 3,
			StateSamples: 1, SyscallSamples: 1, Tally: []ThreadTally{
				{State: Blocked, Syscall: 202, SyscallName: "futex", Samples: 2}, {State: Polling, Syscall: 232, SyscallName: "epoll_wait", Samples: 1}}},
		{TID: 12, Name: "kafka-producer-", State: Blocked, Syscall: 202, SyscallName: "futex", Wchan: "futex_do_wait", Seen: 3,
			StateSamples: 3, SyscallSamples: 3, Tally: []ThreadTally{{State: Blocked, Syscall: 202, SyscallName: "futex", Samples: 3}}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Classify (-want +got):\n%s", d)
	}
	busy := Classify(java, [][]ThreadSample{sample(232, -1, 'R')}, "amd64")
	if s := busy.Network[1].State; s != Busy {
		t.Errorf("a running network thread: %s, want busy", s)
	}
	arm := Classify(java, [][]ThreadSample{sample(22, 98, 'S')}, "arm64")
	if arm.Network[0].State != Polling || arm.Network[1].SyscallName != "futex" {
		t.Errorf("arm64's epoll_pwait (22) and futex (98): %+v", arm.Network)
	}
	if g := Classify(nil, [][]ThreadSample{sample(232, 232, 'S')}, "amd64"); g.Instances != -1 || len(g.Network) != 0 {
		t.Errorf("no library: %+v, want no instances and no network thread", g)
	}
}

// TestDocsUpToDate fails when docs/clients.md is not what the catalog
// writes.
func TestDocsUpToDate(t *testing.T) {
	var buf bytes.Buffer
	if err := Markdown(&buf, All()); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("..", DocsPath))
	if err != nil {
		t.Fatalf("%v: run go generate ./clients/", err)
	}
	if d := cmp.Diff(string(committed), buf.String()); d != "" {
		t.Errorf("%s is stale: run go generate ./clients/ and commit it (-committed +generated):\n%s", DocsPath, d)
	}
}
