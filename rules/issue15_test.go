package rules

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
)

// TestIssue15Corpus lints testdata/issue15, one file per defect of issue
// 15 that concerns what the clients do (placeholders and config providers,
// ISO-8859-1, librdkafka's strtol and range handling, its backoff check and
// aliases, KD104, dialect detection, the idempotence message), as a user's
// file: the dialect detected from the name and content, as kdiag lint does.
// Each file's comment cites the client source its expectations come from;
// the librdkafka readings are also checked against the real library in
// TestLibrdkafkaDifferential, and ISO-8859-1 against java.util.Properties
// in config's TestDifferentialJava. Every finding must be a "# want" of
// the file, nothing more, and the messages say what the client does.
func TestIssue15Corpus(t *testing.T) {
	messages := map[string][]string{
		"application-placeholders.properties": {
			"5:KD101 -1 disables idle-connection closing",
			"5:KD101 (the default of its placeholder, used when KAFKA_IDLE is not set)",
			"7:KD411 ${KAFKA_DELIVERY} comes from KAFKA_DELIVERY at run time",
		},
		"providers.properties": {
			"7:KD411 is resolved at run time by config provider env",
			`9:KD410 has a variable of config provider "file", which config.providers does not declare`,
		},
		"rdkafka-strtol.properties": {
			"5:KD102 30000 is not below the broker's connections.max.idle.ms (30000 ms)",
			`6:KD401 librdkafka reads "9m" as 9 and ignores "m"`,
			"7:KD402 librdkafka reads 4294967296 as 0",
			"8:KD402 librdkafka reads 2147483648 as -2147483648",
		},
		"rdkafka-idle-zero.properties": {"2:KD104 reconnects (no CLOSE_WAIT)"},
		"rdkafka-template.properties":  {"6:KD410 looks like template text"},
		"idempotence-explicit.properties": {
			"6:KD304 with enable.idempotence=true: the producer throws ConfigException \"Must set max.in.flight.requests.per.connection to at most 5",
		},
		"java-one-lib-key.properties": {"6:KD404 queue.buffering.max.ms is a librdkafka property: the Java producer ignores it"},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "issue15", "*"))
	if err != nil || len(files) < 10 {
		t.Fatalf("%d corpus files (%v)", len(files), err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tc := loadCase(t, path)
			fs, err := config.ParseAll(path, string(tc.src), config.Unknown)
			if err != nil || len(fs) != 1 {
				t.Fatalf("ParseAll: %v, %d files", err, len(fs))
			}
			var got []string
			byLine := map[string][]string{}
			for _, fd := range LintFile(fs[0], tc.opts) {
				k := fmt.Sprintf("%d:%s", fd.Pos.Line, fd.RuleID)
				got = append(got, k)
				byLine[k] = append(byLine[k], fd.Message)
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s\nmessages: %v", diff, byLine)
			}
			for _, m := range messages[filepath.Base(path)] {
				k, text, _ := strings.Cut(m, " ")
				found := false
				for _, msg := range byLine[k] {
					found = found || strings.Contains(msg, text)
				}
				if !found {
					t.Errorf("no %s finding says %q: %v", k, text, byLine[k])
				}
			}
		})
	}
}
