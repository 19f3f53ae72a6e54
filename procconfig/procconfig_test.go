package procconfig

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/rules"
)

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	base := t.TempDir()
	rootfs, dir := filepath.Join(base, "rootfs"), filepath.Join(base, "proc", "42")
	write(t, filepath.Join(rootfs, "etc/app/application.yml"), "spring:\n  kafka:\n    bootstrap-servers: kafka:9092\n")
	write(t, filepath.Join(rootfs, "srv/application.properties"), "spring.kafka.producer.properties.connections.max.idle.ms=-1\n")
	write(t, filepath.Join(rootfs, "srv/config/application-prod.yml"), "spring:\n  kafka:\n    producer:\n      acks: all\n")
	args := []string{"java", "-Dspring.config.location=optional:file:/etc/app/application.yml", "-jar", "app.jar", "--spring.profiles.active=prod", "--extra=missing.properties"}
	write(t, filepath.Join(dir, "cmdline"), strings.Join(args, "\x00")+"\x00")
	write(t, filepath.Join(dir, "environ"), "KAFKA_HOME=/opt/kafka\x00SPRING_KAFKA_PRODUCER_PROPERTIES_CONNECTIONS_MAX_IDLE_MS=-1\x00SPRING_KAFKA_PROPERTIES_SASL_JAAS_CONFIG=x password=\"hunter2\";\x00")
	for n, target := range map[string]string{"root": rootfs, "cwd": filepath.Join(rootfs, "srv")} {
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	got := Find(filepath.Join(base, "proc"), 42, clients.Client{Library: clients.KafkaClients})
	var paths []string
	for _, s := range got {
		paths = append(paths, s.Path+" ("+s.Dialect+")")
	}
	want := []string{"/etc/app/application.yml (spring)", "missing.properties ()", "application.properties (spring)", "config/application-prod.yml (spring)", "environment (spring)"}
	if strings.Join(paths, ", ") != strings.Join(want, ", ") {
		t.Fatalf("found %q, want %q", paths, want)
	}
	if got[1].Err == "" || got[1].File != nil {
		t.Errorf("a named file that does not exist: %+v, want an error", got[1])
	}
	env := got[4]
	var all []string
	for _, s := range got {
		if s.File == nil {
			continue
		}
		for _, f := range rules.LintFile(s.File, rules.DefaultOptions()) {
			all = append(all, s.Where(int(f.Pos.Line))+" "+f.RuleID+" "+f.Message+" "+f.Evidence)
		}
	}
	text := strings.Join(all, "\n")
	for _, w := range []string{"application.properties:1 KD101", "environment SPRING_KAFKA_PRODUCER_PROPERTIES_CONNECTIONS_MAX_IDLE_MS KD101"} {
		if !strings.Contains(text, w) {
			t.Errorf("lint lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "hunter2") {
		t.Errorf("a password from the environment in the findings:\n%s", text)
	}
	if len(env.Vars) != 2 {
		t.Errorf("environment vars %q: want the two SPRING_KAFKA_ ones (KAFKA_HOME is no setting)", env.Vars)
	}
}

// TestFindLogBlock runs a process that holds its application log open, as a
// JVM holds its log4j file: the last ProducerConfig values block in it is a
// source, the effective configuration, and the process's environment comes
// with every source for its placeholders.
func TestFindLogBlock(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "app.log")
	block := func(acks string) string {
		return "2026-12-04 10:00:00 INFO ProducerConfig values: \n" +
			"\tacks = " + acks + "\n\tbootstrap.servers = [b1:9092, b2:9092]\n\tconnections.max.idle.ms = -1\n\tlinger.ms = 5\n" +
			"2026-12-04 10:00:00 INFO Kafka version: 3.9.0\n"
	}
	if err := os.WriteFile(log, []byte("starting\n"+block("1")+"later\n"+block("-1")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `exec 3<"$0"; sleep 30`, log)
	cmd.Env = append(os.Environ(), "KAFKA_LINGER=7")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var srcs []Source
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		srcs = Find("/proc", cmd.Process.Pid, clients.Client{Library: clients.KafkaClients})
		if slices.ContainsFunc(srcs, func(s Source) bool { return s.Path == log }) || time.Now().After(deadline) {
			break
		}
	}
	i := slices.IndexFunc(srcs, func(s Source) bool { return s.Path == log })
	if i < 0 {
		t.Fatalf("sources %+v, want the log %s", srcs, log)
	}
	s := srcs[i]
	if s.File == nil || !strings.Contains(s.How, "last of the 2 ProducerConfig values blocks") {
		t.Fatalf("log source %+v, want the last of 2 blocks", s)
	}
	got := map[string]string{}
	for _, e := range s.File.Entries {
		got[e.Key] = e.Value
	}
	if got["acks"] != "-1" || got["bootstrap.servers"] != "b1:9092,b2:9092" || got["connections.max.idle.ms"] != "-1" {
		t.Errorf("entries %v, want the second block's, as a properties file would say them", got)
	}
	if s.Env["KAFKA_LINGER"] != "7" {
		t.Errorf("environment not with the source: %v", s.Env["KAFKA_LINGER"])
	}
}

// TestCandidatesFileURL: -Dlog4j.configuration=file:/etc/app/log4j.properties
// names the logging framework's file, no producer configuration, and is not
// taken (issue 27: it was read as "file:/etc/app/log4j.properties" under the
// process's cwd); a file: URL elsewhere names an absolute path.
func TestCandidatesFileURL(t *testing.T) {
	args := []string{"java", "-Dlog4j.configuration=file:/etc/app/log4j.properties",
		"-Dlog4j2.configurationFile=/etc/app/log4j2.yaml", "--producer.config=file:///etc/app/producer.properties",
		"--other=file:/srv/kafka.conf", "-jar", "app.jar"}
	var got []string
	for _, c := range candidates(args, nil) {
		got = append(got, c.path)
	}
	want := []string{"/etc/app/producer.properties", "/srv/kafka.conf"}
	if !slices.Equal(got, want) {
		t.Errorf("candidates %q, want %q", got, want)
	}
}
