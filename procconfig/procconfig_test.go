package procconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			all = append(all, s.Where(f.Pos.Line)+" "+f.RuleID+" "+f.Message+" "+f.Evidence)
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
