package analyzer

import (
	"fmt"
	"strings"
	"time"

	"github.com/kdiag/kdiag/fds"
	"github.com/kdiag/kdiag/internal/human"
)

// Kinds of finding about a process's fds and client instances.
const (
	// KindFDLimit: the process is near its fd limit (RLIMIT_NOFILE), or
	// its fds grow toward it.
	KindFDLimit = "fd-limit-near"
	// KindInstancesMany: one process runs many instances of its client
	// (one per application is the norm): clients created per request or
	// batch and never closed.
	KindInstancesMany = "instances-many"
)

// FDEvidence is what kdiag doctor read of a process's fds: the census at
// the end and, over --duration, the open count at each scan.
type FDEvidence struct {
	Last fds.Census
	// Times and Open are the open fds at each scan (empty for one look).
	Times []time.Time
	Open  []int
}

// Growth fits the open-fd counts: the trend, and the time left to the soft
// limit at its rate; false without a limit or a growing trend.
func (e *FDEvidence) Growth(opts Options) (Trend, time.Duration, bool) {
	tr := Fit(e.Times, e.Open, opts)
	head, ok := e.Last.Headroom()
	if !ok || tr.Verdict != Growing || tr.PerMinute <= 0 {
		return tr, 0, false
	}
	return tr, time.Duration(float64(head) / tr.PerMinute * float64(time.Minute)), true
}

// The thresholds of the fd findings: a warning at 80% of the soft limit or
// when the growth reaches it within an hour, critical at 95% or within ten
// minutes. A process at the limit fails every open(), connect() and
// accept() with EMFILE ("Too many open files").
const (
	fdWarnShare = 0.80
	fdCritShare = 0.95
	fdWarnETA   = time.Hour
	fdCritETA   = 10 * time.Minute
)

// fdLimitFinding reports a process near its fd limit, or growing toward it.
func fdLimitFinding(p *ProcessSeries, ev Evidence, opts Options) (Finding, bool) {
	if ev.FDs == nil {
		return Finding{}, false
	}
	c := ev.FDs.Last
	used, ok := c.Used()
	if !ok {
		return Finding{}, false
	}
	tr, eta, growing := ev.FDs.Growth(opts)
	f := Finding{Process: p.Key, Name: p.Name(), Kind: KindFDLimit}
	switch {
	case used >= fdCritShare || growing && eta <= fdCritETA:
		f.Severity = Critical
	case used >= fdWarnShare || growing && eta <= fdWarnETA:
		f.Severity = Warning
	default:
		return Finding{}, false
	}
	f.Summary = fmt.Sprintf("%s (%s) has %d of its %d fds open (%.0f%%)", p.Name(), p.Key, c.Open, c.Soft, 100*used)
	if growing {
		f.Summary += fmt.Sprintf(", %s: EMFILE (\"Too many open files\") in ~%s", rate(tr.PerMinute), human.Age(eta))
	}
	f.Details = []string{processLine(p), "Fds: " + CensusWords(c) + "."}
	if growing {
		f.Details = append(f.Details, fmt.Sprintf("Growth: %s (least-squares over %d scans in %s); %d fds left.",
			rate(tr.PerMinute), tr.Samples, human.Age(tr.Span), c.Soft-uint64(c.Open)))
	}
	f.Evidence = f.Details[1:]
	cause := Cause{ID: "fds-exhausted",
		Title: "Once the process reaches its fd limit, every new socket, file and pipe fails with EMFILE: the client cannot reconnect to a broker.",
		Fix:   fmt.Sprintf("Find what holds the fds (the census above: the kind that dominates) and close it; raise the limit (ulimit -n, LimitNOFILE= in its systemd unit, its container runtime's nofile) only once the leak is fixed. The hard limit is %s.", limitWords(c.Hard))}
	if lib := ev.Client.Catalog(); lib != nil && lib.Fix != "" && c.ByKind[fds.Socket] > c.Open/2 {
		cause.Fix += " Sockets dominate: " + lib.Fix
	}
	f.Causes = []Cause{withText(cause)}
	return f, true
}

// manyInstances is the instance count of one client library in one process
// that is a finding at one look: an application needs one producer (or a
// few: one per cluster or per distinct configuration); eight that all live
// are the sign of producers created per request or batch and never closed.
const manyInstances = 8

// instancesManyFinding reports a process running many instances of its
// client at one look, with the fds each brings.
func instancesManyFinding(p *ProcessSeries, ev Evidence) (Finding, bool) {
	lib := ev.Client.Catalog()
	if ev.Threads == nil || lib == nil || lib.Threads == nil || ev.Threads.Instances < manyInstances {
		return Finding{}, false
	}
	n := ev.Threads.Instances
	f := Finding{Severity: Warning, Kind: KindInstancesMany, Process: p.Key, Name: p.Name()}
	f.Summary = fmt.Sprintf("%d %s instances in %s (%s): one per application is the norm; these look created per request or batch and never closed",
		n, lib.Name, p.Name(), p.Key)
	line := fmt.Sprintf("Instances: %d %s threads (%s).", n, lib.Threads.Full, lib.Threads.Fact.Source)
	f.Details = []string{processLine(p), clientLine(ev.Client), line}
	f.Evidence = []string{line}
	if ev.FDs != nil {
		c := ev.FDs.Last
		fl := fmt.Sprintf("Fds: %s; %d epoll instances and %d eventfds beside %d instances.", CensusWords(c), c.ByKind[fds.Epoll], c.ByKind[fds.EventFD], n)
		f.Details = append(f.Details, fl)
		f.Evidence = append(f.Evidence, fl)
	}
	f.Causes = []Cause{notClosedCause(p, ev, fmt.Sprintf("%d instances at one look", n))}
	return f, true
}

// CensusWords writes a census for people: "143 of 1024 (14%): socket 16,
// pipe 40, eventfd 2, epoll 10, file 70, other 5".
func CensusWords(c fds.Census) string {
	s := fmt.Sprintf("%d open", c.Open)
	if used, ok := c.Used(); ok {
		s = fmt.Sprintf("%d of %d (%.0f%%)", c.Open, c.Soft, 100*used)
	}
	var parts []string
	for _, k := range fds.Kinds {
		if n := c.ByKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s
}

func limitWords(l uint64) string {
	if l == fds.Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(l)
}
