package clients

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixture builds a /proc/<pid> tree for one process under a temporary proc
// root, with root and cwd pointing into a temporary filesystem, and returns
// the proc root and that filesystem's root.
type fixture struct {
	t              *testing.T
	procRoot, fs   string
	pid            string
	args           []string
	env, comm, exe string
	maps           string
	fds            map[string]string
}

func (f fixture) build() (procRoot string, pid int) {
	t := f.t
	dir := filepath.Join(f.procRoot, f.pid)
	must(t, os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(f.args, "\x00")+"\x00"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(f.env), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(f.comm+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "maps"), []byte(f.maps), 0o644))
	must(t, os.Symlink(f.exe, filepath.Join(dir, "exe")))
	must(t, os.Symlink(f.fs, filepath.Join(dir, "root")))
	must(t, os.Symlink(filepath.Join(f.fs, "app"), filepath.Join(dir, "cwd")))
	for n, target := range f.fds {
		must(t, os.Symlink(target, filepath.Join(dir, "fd", n)))
	}
	var n int
	for _, c := range f.pid {
		n = n*10 + int(c-'0')
	}
	return f.procRoot, n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(data), 0o644))
}

func TestIdentifyFixtures(t *testing.T) {
	base := t.TempDir()
	rootfs := filepath.Join(base, "rootfs")
	procRoot := filepath.Join(base, "proc")
	// The executables' links point nowhere real, so that no host file is
	// read for them.
	const nowhere = "/nonexistent-kdiag-fixture"
	writeFile(t, filepath.Join(rootfs, "app/producer.py"), "import json\nfrom kafka import KafkaProducer\n")
	writeFile(t, filepath.Join(rootfs, "usr/lib/python3/dist-packages/kafka_python-2.0.2.egg-info/PKG-INFO"), "Version: 2.0.2\n")
	writeFile(t, filepath.Join(rootfs, "app/other.py"), "import requests\n")
	writeFile(t, filepath.Join(rootfs, "app/index.js"), "'use strict'\nconst { Kafka } = require('kafkajs')\n")
	writeFile(t, filepath.Join(rootfs, "app/node_modules/kafkajs/package.json"), `{"name": "kafkajs", "version": "2.2.4"}`)
	fat := zipOf(t, map[string]string{"BOOT-INF/lib/kafka-clients-3.7.1.jar": "x", "BOOT-INF/classes/application.yml": ""})
	writeFile(t, filepath.Join(rootfs, "srv/app.jar"), string(fat))

	for _, tc := range []struct {
		name string
		f    fixture
		want Client
	}{
		{"kafka-python", fixture{pid: "101", args: []string{"python3", "-u", "producer.py"}, comm: "python3", exe: nowhere + "/usr/bin/python3.11"},
			Client{Library: KafkaPython, Version: "2.0.2", Language: "Python", Evidence: []string{
				"/app/producer.py line 2: from kafka import",
				"kafka-python 2.0.2 installed for python3.11 (/usr/lib/python3/dist-packages/kafka_python-2.0.2.egg-info)"}}},
		{"python without a client", fixture{pid: "102", args: []string{"python3", "other.py"}, comm: "python3", exe: nowhere + "/usr/bin/python3.11"},
			Client{Evidence: []string{"client not identified", "no librdkafka in /proc/102/maps", "a python process whose main script /app/other.py imports no Kafka client"}}},
		{"kafkajs", fixture{pid: "103", args: []string{"node", "index.js"}, comm: "node", exe: nowhere + "/usr/bin/node"},
			Client{Library: KafkaJS, Version: "2.2.4", Language: "JavaScript", Evidence: []string{
				"/app/index.js line 2: require('kafkajs'", "version 2.2.4 from /app/node_modules/kafkajs/package.json"}}},
		{"java class path", fixture{pid: "104", args: []string{"java", "-Xmx1g", "-cp", "/opt/app/lib/app.jar:/opt/app/lib/kafka-clients-3.9.0.jar", "com.example.Main"}, comm: "java", exe: nowhere + "/usr/bin/java"},
			Client{Library: KafkaClients, Version: "3.9.0", Language: "Java", Evidence: []string{"/opt/app/lib/kafka-clients-3.9.0.jar (class path -cp)"}}},
		{"spring boot fat jar", fixture{pid: "105", args: []string{"java", "-jar", "/srv/app.jar"}, comm: "java", exe: nowhere + "/usr/bin/java"},
			Client{Library: KafkaClients, Version: "3.7.1", Language: "Java", Evidence: []string{"BOOT-INF/lib/kafka-clients-3.7.1.jar inside /srv/app.jar (-jar)"}}},
		{"jar open", fixture{pid: "106", args: []string{"java", "Main"}, comm: "java", exe: nowhere + "/usr/bin/java",
			fds: map[string]string{"4": "/opt/lib/kafka-clients-7.7.0-ccs.jar", "5": "socket:[123]"}},
			Client{Library: KafkaClients, Version: "7.7.0-ccs", Language: "Java", Evidence: []string{"/opt/lib/kafka-clients-7.7.0-ccs.jar (open in /proc/106/fd)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.t, tc.f.procRoot, tc.f.fs = t, procRoot, rootfs
			pr, pid := tc.f.build()
			got, err := Identify(pr, pid)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Identify (-want +got):\n%s", d)
			}
		})
	}
	if _, err := Identify(procRoot, 99999); err == nil || !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing process: %v, want not exist", err)
	}
}

// TestIdentifyLibrdkafkaBinding maps the host's librdkafka into a fixture
// process of confluent-kafka-python.
func TestIdentifyLibrdkafkaBinding(t *testing.T) {
	libs, _ := filepath.Glob("/usr/lib/*-linux-gnu/librdkafka.so.1")
	if len(libs) == 0 {
		t.Skip("librdkafka.so.1 not installed (Debian package librdkafka1; .ci/run installs kcat, which pulls it in)")
	}
	want, _, err := rdkafkaVersionOf(libs[0])
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	rootfs := filepath.Join(base, "rootfs")
	lib := "/usr/lib/x86_64-linux-gnu/librdkafka.so.1"
	must(t, os.MkdirAll(filepath.Join(rootfs, filepath.Dir(lib)), 0o755))
	must(t, os.Symlink(libs[0], filepath.Join(rootfs, lib)))
	writeFile(t, filepath.Join(rootfs, "usr/lib/python3/dist-packages/confluent_kafka-1.7.0.egg-info/PKG-INFO"), "Version: 1.7.0\n")
	must(t, os.MkdirAll(filepath.Join(rootfs, "app"), 0o755))
	cimpl := "/usr/lib/python3/dist-packages/confluent_kafka/cimpl.cpython-311-x86_64-linux-gnu.so"
	f := fixture{t: t, procRoot: filepath.Join(base, "proc"), fs: rootfs, pid: "200", args: []string{"python3", "app.py"}, comm: "python3",
		exe:  "/nonexistent-kdiag-fixture/usr/bin/python3.11",
		maps: "7f00-7f01 r-xp 00000000 fe:01 1 " + lib + "\n7f02-7f03 r-xp 00000000 fe:01 2 " + cimpl + "\n"}
	pr, pid := f.build()
	got, err := Identify(pr, pid)
	if err != nil {
		t.Fatal(err)
	}
	if got.Library != Librdkafka || got.Version != want || got.Binding != "confluent-kafka-python 1.7.0" || got.Language != "Python" {
		t.Errorf("Identify = %+v, want librdkafka %s loaded by confluent-kafka-python 1.7.0", got, want)
	}
}
