package analyzer

import (
	"fmt"
	"strings"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/netstat"
)

// KindKnownBug: the client's version has a known connection or fd bug
// (clients.BugsFor); a warning when the process shows its symptom, info
// when it does not now.
const KindKnownBug = "known-bug"

// knownBugFindings matches the process's client version against the
// catalog of known bugs: one warning per bug whose symptom the process
// shows, and one info finding naming the others.
func knownBugFindings(p *ProcessSeries, ev Evidence) []Finding {
	c := ev.Client
	if !c.Identified() || c.Version == "" {
		return nil
	}
	bugs := clients.BugsFor(c.Library, c.Version)
	if len(bugs) == 0 {
		return nil
	}
	var out []Finding
	var absent []string
	for _, b := range bugs {
		shown, what := symptomShown(b.Symptom, p, ev)
		if !shown {
			absent = append(absent, fmt.Sprintf("%s (%s, fixed in %s)", bugRef(b), b.Symptom, b.Fixed))
			continue
		}
		f := Finding{Severity: Warning, Kind: KindKnownBug, Process: p.Key, Name: p.Name()}
		f.Summary = fmt.Sprintf("%s %s is affected by %s, fixed in %s%s: %s shows its symptom, %s",
			c.Library, c.Version, bugRef(b), b.Fixed, fixedBy(b), p.Name(), what)
		line := fmt.Sprintf("Known bug %s: %s (affected %s; sources: %s).", b.ID, b.Title, b.Range(), sources(b))
		f.Details = []string{processLine(p), clientLine(c), line, "Symptom: " + b.Symptom.Describe() + "."}
		f.Evidence = []string{line}
		f.Causes = []Cause{withText(Cause{ID: b.ID, Title: b.Title,
			Fix:      fmt.Sprintf("Upgrade %s to %s or later.", c.Library, b.Fixed),
			Evidence: []string{"Symptom seen: " + what + "."}})}
		out = append(out, f)
	}
	if len(absent) > 0 {
		f := Finding{Severity: Info, Kind: KindKnownBug, Process: p.Key, Name: p.Name(),
			Summary: fmt.Sprintf("%s %s is affected by %s whose symptom %s not seen now: %s",
				c.Library, c.Version, human.Plural(len(absent), "known bug"), map[bool]string{true: "is", false: "are"}[len(absent) == 1], strings.Join(absent, "; "))}
		f.Details = []string{processLine(p), clientLine(c), "docs/known-bugs.md lists each bug with its sources."}
		f.Causes = []Cause{withText(Cause{ID: "upgrade", Title: "Known bugs of this version that this process does not show now.",
			Fix: fmt.Sprintf("Upgrade %s past the fixed releases named.", c.Library)})}
		out = append(out, f)
	}
	return out
}

// symptomShown says whether the process shows a bug's symptom now, and in
// what words.
func symptomShown(s clients.Symptom, p *ProcessSeries, ev Evidence) (bool, string) {
	held := ev.HeldClosed
	if held < 0 {
		held = p.Last.Get(netstat.Close)
	}
	cw := p.Last.Get(netstat.CloseWait)
	switch s {
	case clients.SymptomHeldClose:
		return held > 0, human.Plural(held, "held CLOSE socket")
	case clients.SymptomCloseWaitLeak:
		return p.CloseWait.Verdict == Growing || cw+held > 0 && p.CloseWait.Verdict != Draining, leakedWords(p.Last)
	case clients.SymptomSeedCloseWait, clients.SymptomIdleCloseWait:
		return cw > 0, human.Plural(cw, "CLOSE_WAIT socket")
	case clients.SymptomFDGrowth:
		if ev.FDs != nil {
			if tr, _, ok := ev.FDs.Growth(Options{}); ok {
				return true, fmt.Sprintf("its fds grow %s", rate(tr.PerMinute))
			}
		}
		if ev.Threads != nil && ev.Threads.Instances >= manyInstances {
			return true, fmt.Sprintf("%d client instances alive", ev.Threads.Instances)
		}
	case clients.SymptomConnectionsToAllBrokers:
		n := 0
		for _, r := range p.Remotes {
			if r.Broker && r.Last.Get(netstat.Established) > 0 {
				n++
			}
		}
		return n >= 3, fmt.Sprintf("connections to %s", human.Plural(n, "broker"))
	case clients.SymptomReconnectChurn, clients.SymptomReconnectStorm:
		return p.Opened >= minReconnects, fmt.Sprintf("%d connections opened to brokers during the window", p.Opened)
	case clients.SymptomSelectLimit:
		if ev.FDs != nil {
			return selectLimitShown(ev.FDs.Last.Highest)
		}
	}
	return false, ""
}

// fdSetSize is glibc's FD_SETSIZE, the fd number select() cannot take
// (select(2), BUGS); CPython's select.select raises "filedescriptor out of
// range in select()" for it.
const fdSetSize = 1024

// selectNear is how close to FD_SETSIZE the highest fd must be for the
// symptom: a process's fd numbers climb by one per fd opened, so an eighth
// of the range left is a few bursts of connections or files away.
const selectNear = fdSetSize - fdSetSize/8

// selectLimitShown says whether a process whose highest fd is highest is
// near or past select()'s bound, and in what words.
func selectLimitShown(highest int) (bool, string) {
	switch {
	case highest >= fdSetSize:
		return true, fmt.Sprintf("its highest fd is %d, past select()'s %d: every select() over it fails now", highest, fdSetSize-1)
	case highest >= selectNear:
		return true, fmt.Sprintf("its highest fd is %d, %d below the first fd select() cannot take (%d)", highest, fdSetSize-highest, fdSetSize)
	}
	return false, ""
}

// bugRef names a bug by its first issue (or PR, or JIRA key).
func bugRef(b clients.KnownBug) string {
	for _, r := range b.Sources {
		if r.Kind == clients.RefIssue || r.Kind == clients.RefJira {
			return r.String()
		}
	}
	if len(b.Sources) > 0 {
		return b.Sources[0].String()
	}
	return b.ID
}

// fixedBy names the pull request that fixed it: " by IBM/sarama#3384".
func fixedBy(b clients.KnownBug) string {
	for _, r := range b.Sources {
		if r.Kind == clients.RefPR && r.Fix {
			return " by " + r.String()
		}
	}
	return ""
}

func sources(b clients.KnownBug) string {
	var s []string
	for _, r := range b.Sources {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}
