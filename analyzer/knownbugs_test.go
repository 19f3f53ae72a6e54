package analyzer

import (
	"slices"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/fds"
)

// TestKnownBugs: Sarama v1.38.1 holding held CLOSE sockets shows IBM/sarama
// #3143's symptom (a warning naming the fixing release); the same version
// without them is affected but shows nothing (info); a fixed version gets
// no known-bug finding.
func TestKnownBugs(t *testing.T) {
	a := Analyze(heldSeries(proc(30, "app", t0), 2), Options{})
	p := &a.Processes[0]
	for _, tc := range []struct {
		version   string
		held      int
		wantWarn  string
		wantInfo  bool
		wantNoBug bool
	}{
		{version: "v1.38.1", held: 4, wantWarn: "IBM/sarama#3143, fixed in v1.48.0 by IBM/sarama#3384"},
		{version: "v1.38.1", held: 0, wantInfo: true},
		{version: "v1.61.1", held: 4, wantNoBug: true},
	} {
		ev := Evidence{Client: clients.Client{Library: clients.Sarama, Version: tc.version, Language: "Go"}, HeldClosed: tc.held}
		var warn, info []Finding
		for _, f := range Diagnose(a, p, ev, Options{}) {
			if f.Kind != KindKnownBug {
				continue
			}
			if f.Severity == Warning {
				warn = append(warn, f)
			} else {
				info = append(info, f)
			}
		}
		switch {
		case tc.wantNoBug && len(warn)+len(info) > 0:
			t.Errorf("%s: known-bug findings for a fixed version: %+v %+v", tc.version, warn, info)
		case tc.wantWarn != "" && !slices.ContainsFunc(warn, func(f Finding) bool {
			return strings.Contains(f.Summary, tc.wantWarn) && strings.Contains(f.Summary, "4 held CLOSE")
		}):
			t.Errorf("%s with %d held: warnings %+v, want one saying %q and the 4 held CLOSE sockets", tc.version, tc.held, warn, tc.wantWarn)
		case tc.wantInfo && (len(warn) > 0 || len(info) != 1 || !strings.Contains(info[0].Summary, "IBM/sarama#3143")):
			t.Errorf("%s without held sockets: warnings %+v, info %+v; want #3143 as affected, symptom not seen", tc.version, warn, info)
		}
	}
}

// TestKnownBugSelectLimit: kafka-python 1.0.2 polls with select(), so a
// highest fd near or past 1024 shows dpkp/kafka-python#613's symptom; far
// below, or at 1.1.0 (selectors), it does not.
func TestKnownBugSelectLimit(t *testing.T) {
	a := Analyze(heldSeries(proc(31, "python3", t0), 1), Options{})
	p := &a.Processes[0]
	for _, tc := range []struct {
		version  string
		highest  int
		wantWarn string
	}{
		{version: "1.0.2", highest: 1100, wantWarn: "its highest fd is 1100, past select()'s 1023"},
		{version: "1.0.2", highest: 950, wantWarn: "its highest fd is 950, 74 below"},
		{version: "1.0.2", highest: 40},
		{version: "1.1.0", highest: 1100},
	} {
		ev := Evidence{Client: clients.Client{Library: clients.KafkaPython, Version: tc.version, Language: "Python"},
			FDs: &FDEvidence{Last: fds.Census{Open: 60, Highest: tc.highest, Soft: 4096}}}
		var warn []string
		for _, f := range Diagnose(a, p, ev, Options{}) {
			if f.Kind == KindKnownBug && f.Severity == Warning && strings.Contains(f.Summary, "dpkp/kafka-python#613") {
				warn = append(warn, f.Summary)
			}
		}
		switch {
		case tc.wantWarn == "" && len(warn) > 0:
			t.Errorf("%s, highest fd %d: %q, want no select() warning", tc.version, tc.highest, warn)
		case tc.wantWarn != "" && (len(warn) != 1 || !strings.Contains(warn[0], tc.wantWarn)):
			t.Errorf("%s, highest fd %d: %q, want one warning saying %q", tc.version, tc.highest, warn, tc.wantWarn)
		}
	}
}
