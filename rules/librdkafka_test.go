package rules

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/config"
)

// librdkafkaHarness sets each "name=value" argument with rd_kafka_conf_set
// on a fresh producer configuration and prints, one line per argument, OK
// and the value rd_kafka_conf_get gives back, or ERR.
const librdkafkaHarness = `
#include <stdio.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

int main(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		char name[256], errstr[512], out[512];
		const char *eq = strchr(argv[i], '=');
		size_t n = (size_t)(eq - argv[i]), outsz = sizeof(out);
		memcpy(name, argv[i], n);
		name[n] = 0;
		rd_kafka_conf_t *conf = rd_kafka_conf_new();
		if (rd_kafka_conf_set(conf, name, eq + 1, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
			printf("ERR\n");
		else if (rd_kafka_conf_get(conf, name, out, &outsz) != RD_KAFKA_CONF_OK)
			printf("ERR get\n");
		else
			printf("OK %s\n", out);
		rd_kafka_conf_destroy(conf);
	}
	return 0;
}
`

// libCorpus are values of librdkafka's integer, float and boolean
// properties where its reading differs from a plain decimal one: strtol
// with base 0 (hex, octal), trailing text it ignores, numbers the int cast
// wraps, and what it refuses.
var libCorpus = []string{
	"connections.max.idle.ms=0x7530", "connections.max.idle.ms=9m", "connections.max.idle.ms=010",
	"connections.max.idle.ms=08", "connections.max.idle.ms=0x", "connections.max.idle.ms=4294967296",
	"connections.max.idle.ms=2147483648", "connections.max.idle.ms=-1", "connections.max.idle.ms=abc",
	"connections.max.idle.ms= 42", "connections.max.idle.ms=+7", "connections.max.idle.ms=99999999999999999999",
	"connections.max.idle.ms=", "message.timeout.ms=4294967296", "reconnect.backoff.ms=1e3",
	"linger.ms=0.5", "linger.ms=5ms", "linger.ms=1e2", "linger.ms=x", "linger.ms=-1",
	"socket.keepalive.enable=T", "socket.keepalive.enable=1", "socket.keepalive.enable=yes",
}

// TestLibrdkafkaDifferential sets libCorpus with the real librdkafka
// (rd_kafka_conf_set, C compiler and librdkafka-dev needed: .ci/run installs
// them) and requires kdiag to read each value as librdkafka does: refused
// exactly when librdkafka refuses it, and otherwise as the number
// librdkafka stores.
func TestLibrdkafkaDifferential(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: the librdkafka differential test needs cc and librdkafka-dev")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "h.c")
	if err := os.WriteFile(src, []byte(librdkafkaHarness), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "h")
	if out, err := exec.Command(cc, "-o", bin, src, "-lrdkafka").CombinedOutput(); err != nil {
		t.Skipf("cannot build against librdkafka (apt-get install librdkafka-dev): %v\n%s", err, out)
	}
	out, err := exec.Command(bin, libCorpus...).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if len(got) != len(libCorpus) {
		t.Fatalf("%d answers for %d values:\n%s", len(got), len(libCorpus), out)
	}
	for i, kv := range libCorpus {
		key, val, _ := strings.Cut(kv, "=")
		t.Run(kv, func(t *testing.T) {
			real := got[i]
			s, ok := LibrdkafkaSetting(key)
			if !ok {
				t.Fatalf("%s not in the catalog", key)
			}
			e := config.Entry{Key: key, RawKey: key, Value: val}
			refused := false
			for _, ve := range checkLibValue(e, s) {
				if ve.Severity == 0 {
					refused = true
				}
			}
			if refused != (real == "ERR") {
				t.Fatalf("librdkafka: %s; kdiag refuses it: %v (%v)", real, refused, checkLibValue(e, s))
			}
			if refused {
				return
			}
			stored := strings.TrimPrefix(real, "OK ")
			var mine string
			switch s.Type {
			case "integer":
				mine = strconv.FormatInt(readLibInt(strings.TrimSpace(val)).val, 10)
			case "float":
				f, _ := strtod(strings.TrimSpace(val))
				r, err := strconv.ParseFloat(stored, 64)
				if err != nil {
					t.Fatalf("librdkafka stored %q", stored)
				}
				if f != r {
					t.Errorf("librdkafka stores %v, kdiag reads %v", r, f)
				}
				return
			case "boolean":
				b, _ := parseLibBool(val)
				mine = fmt.Sprint(b)
			}
			if mine != stored {
				t.Errorf("librdkafka stores %s, kdiag reads %s", stored, mine)
			}
		})
	}
}

// librdkafkaNamesHarness prints, for each name=value argument, the code
// rd_kafka_conf_set returns (RD_KAFKA_CONF_UNKNOWN is -2) and its message;
// with --show it prints the property table of the library instead
// (rd_kafka_conf_properties_show) and its version.
const librdkafkaNamesHarness = `
#include <stdio.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

int main(int argc, char **argv) {
	if (argc == 2 && !strcmp(argv[1], "--show")) {
		printf("VERSION %s\n", rd_kafka_version_str());
		rd_kafka_conf_properties_show(stdout);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		char name[256], errstr[512] = "";
		const char *eq = strchr(argv[i], '=');
		size_t n = (size_t)(eq - argv[i]);
		memcpy(name, argv[i], n);
		name[n] = 0;
		rd_kafka_conf_t *conf = rd_kafka_conf_new();
		int res = rd_kafka_conf_set(conf, name, eq + 1, errstr, sizeof(errstr));
		for (char *c = errstr; *c; c++)
			if (*c == '\n')
				*c = ' ';
		printf("%d %s\n", res, errstr);
		rd_kafka_conf_destroy(conf);
	}
	return 0;
}
`

// TestLibrdkafkaNamesDifferential holds kdiag's librdkafka property table
// (upstream/librdkafka-properties.tsv) against the real library: every name
// the installed librdkafka lists is in it, and for every name of the table,
// its topic. forms and names it does not have, KD404 fires exactly where
// rd_kafka_conf_set refuses the name ("No such configuration property", a
// callback, an internal or a Java property). Names the installed library
// is too old to have are counted and skipped.
func TestLibrdkafkaNamesDifferential(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: the librdkafka differential test needs cc and librdkafka-dev")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "names.c")
	if err := os.WriteFile(src, []byte(librdkafkaNamesHarness), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "names")
	if out, err := exec.Command(cc, "-o", bin, src, "-lrdkafka").CombinedOutput(); err != nil {
		t.Skipf("cannot build against librdkafka (apt-get install librdkafka-dev): %v\n%s", err, out)
	}
	show, err := exec.Command(bin, "--show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var installed string
	listed := map[string]bool{}
	for _, line := range strings.Split(string(show), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION "); ok {
			installed = v
			continue
		}
		if name, _, ok := strings.Cut(line, "|"); ok && regexp.MustCompile(`^[a-z_.0-9]+ +$`).MatchString(name) {
			listed[strings.TrimSpace(name)] = true
		}
	}
	if len(listed) < 100 {
		t.Fatalf("rd_kafka_conf_properties_show listed %d names:\n%s", len(listed), show)
	}
	for n := range listed {
		if _, ok := librdkafkaProperty(n); !ok {
			t.Errorf("librdkafka %s has %s; kdiag's table (librdkafka %s) does not", installed, n, librdkafkaVersion)
		}
	}

	names := []string{"broker.list", "foo.bar", "buffer.memory", "key.serializer", "log.retention.hours",
		"topic.foo", "topic.bootstrap.servers", "connection.max.idle.ms", "max.block.ms"}
	for n, ps := range libProps() {
		names = append(names, n)
		for _, p := range ps {
			if p.scope == "topic" {
				names = append(names, "topic."+n)
			}
		}
	}
	sort.Strings(names)
	args := make([]string, len(names))
	for i, n := range names {
		args[i] = n + "=1"
	}
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	answers := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(answers) != len(names) {
		t.Fatalf("%d answers for %d names", len(answers), len(names))
	}
	tooNew := 0
	for i, n := range names {
		code, msg, _ := strings.Cut(answers[i], " ")
		// A value problem ("Invalid value", a range) is not the name's;
		// a plugin path that does not load either.
		refused := code == "-2" || strings.Contains(msg, "must be set through") || strings.Contains(msg, "not settable") ||
			(strings.Contains(msg, "not supported") && !strings.Contains(msg, "in this build"))
		f, err := config.Parse(n+".rdkafka.properties", []byte(n+"=1\n"), config.Librdkafka)
		if err != nil {
			t.Fatal(err)
		}
		reported := false
		for _, fd := range LintFile(f, DefaultOptions()) {
			if fd.RuleID == "KD404" {
				reported = true
			}
		}
		if refused && !reported {
			if _, inTable := librdkafkaProperty(n); inTable && code == "-2" && installed != librdkafkaVersion {
				tooNew++
				continue
			}
		}
		if refused != reported {
			t.Errorf("%s: librdkafka %s: %s %s; kdiag reports KD404: %v", n, installed, code, msg, reported)
		}
	}
	t.Logf("%d names checked against librdkafka %s; %d are newer than it (kdiag's table is %s)", len(names), installed, tooNew, librdkafkaVersion)
}
