package rules_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/producer"
	"github.com/kdiag/kdiag/rules"
)

// TestKdiagKeysMatchProducer holds lint's kdiag.* keys against the keys
// kdiag's producer reads (producer.Keys), and its checks against the
// producer's: a value the producer refuses is an error in lint, and one it
// takes is none.
func TestKdiagKeysMatchProducer(t *testing.T) {
	var want []string
	for _, k := range producer.Keys() {
		if strings.HasPrefix(k, "kdiag.") {
			want = append(want, k)
		}
	}
	if diff := cmp.Diff(want, rules.KdiagKeys()); diff != "" {
		t.Errorf("kdiag.* keys (-producer +lint):\n%s", diff)
	}
	values := map[string][]string{
		"kdiag.reader":            {"poll", "on-demand", "ondemand", " poll ", "stalled", "POLL", ""},
		"kdiag.callback.delay.ms": {"0", "20000", "-1", "5s", "", "9223372036854775807"},
		"kdiag.model":             {"java-3.9", "java-2.1", "2.1.1", "3.9", " java-2.1 ", "java-4.0", "JAVA-3.9", ""},
	}
	for key, vals := range values {
		for _, v := range vals {
			_, perr := producer.ParseConfig(map[string]string{"bootstrap.servers": "a:9092", key: v})
			f, err := config.Parse("p.properties", []byte("bootstrap.servers=a:9092,b:9092\n"+key+"="+v+"\n"), config.Java)
			if err != nil {
				t.Fatal(err)
			}
			var lintErr []string
			for _, fd := range rules.LintFile(f, rules.DefaultOptions()) {
				if fd.Key == key && fd.Severity == rules.Error {
					lintErr = append(lintErr, fd.RuleID+" "+fd.Message)
				}
				if fd.RuleID == "KD404" {
					t.Errorf("%s=%q: %s", key, v, fd.Message)
				}
			}
			if (perr != nil) != (len(lintErr) > 0) {
				t.Errorf("%s=%q: producer: %v; lint errors: %v", key, v, perr, lintErr)
			}
		}
	}
}
