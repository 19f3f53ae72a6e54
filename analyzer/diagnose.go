package analyzer

import (
	"fmt"
	"github.com/kdiag/kdiag/internal/human"
	"slices"
	"strings"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

// Severity is how urgent a finding is.
type Severity int

// Severities, ordered.
const (
	Info Severity = iota + 1
	Warning
	Critical
)

// String returns "info", "warning" or "critical".
func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Kinds of finding.
const (
	// KindLeak: CLOSE_WAIT grows significantly: sockets pile up.
	KindLeak = "close-wait-growing"
	// KindHeld: CLOSE_WAIT does not grow but sockets stay past StuckAge.
	KindHeld = "close-wait-held"
	// KindDraining: CLOSE_WAIT falls: the application is closing them.
	KindDraining = "close-wait-draining"
	// KindConnLeak: ESTABLISHED grows with new local ports: clients created
	// and not closed.
	KindConnLeak = "connections-growing"
)

// Finding is one diagnosis about one process.
type Finding struct {
	Severity Severity   `json:"severity"`
	Kind     string     `json:"kind"`
	Process  ProcessKey `json:"process"`
	Name     string     `json:"name"`
	// Summary is one line: what, who, how many, how fast.
	Summary string `json:"summary"`
	// Details are the evidence, one statement each: the process, the
	// brokers, since when, the rate, what Recv-Q says.
	Details []string `json:"details"`
	// Causes are the likely causes, most likely first, with what to do.
	Causes []Cause `json:"causes"`
}

// Cause is a likely cause and the lint rules that check for it.
type Cause struct {
	Text  string   `json:"text"`
	Rules []string `json:"rules,omitempty"`
}

// diagnose writes the findings for every process of a, worst first.
func diagnose(a *Analysis, opts Options) []Finding {
	var out []Finding
	for i := range a.Processes {
		p := &a.Processes[i]
		if f, ok := closeWaitFinding(a, p, opts); ok {
			out = append(out, f)
		}
		if f, ok := connLeakFinding(a, p); ok {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(x, y Finding) int { return int(y.Severity) - int(x.Severity) })
	return out
}

func closeWaitFinding(a *Analysis, p *ProcessSeries, opts Options) (Finding, bool) {
	tr := p.CloseWait
	f := Finding{Process: p.Key, Name: p.Name()}
	oldest, hasOld := p.OldestCloseWait()
	switch {
	case tr.Verdict == Growing:
		f.Severity, f.Kind = Critical, KindLeak
		f.Summary = fmt.Sprintf("CLOSE_WAIT leak in %s (%s): %d → %d sockets in %s, %s",
			p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), rate(tr.PerMinute))
	case tr.Verdict == Draining:
		f.Severity, f.Kind = Info, KindDraining
		f.Summary = fmt.Sprintf("CLOSE_WAIT draining in %s (%s): %d → %d sockets in %s, %s: the application is closing them",
			p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), rate(tr.PerMinute))
	case hasOld && oldest.AgeAt(a.End) >= opts.StuckAge:
		f.Severity, f.Kind = Warning, KindHeld
		f.Summary = fmt.Sprintf("%s held by %s (%s) for up to %s, not growing (%s over %s), never closed",
			human.Plural(tr.Last, "CLOSE_WAIT socket"), p.Name(), p.Key, human.Age(oldest.AgeAt(a.End)), verdictWord(tr.Verdict), human.Age(tr.Span))
	default:
		return Finding{}, false
	}
	f.Details = append(f.Details, processLine(p))
	if line := remotesLine(p, true); line != "" {
		f.Details = append(f.Details, line)
	}
	if hasOld {
		src := "first seen by this watch"
		if !oldest.FINAt.IsZero() && oldest.FINAt.Before(oldest.FirstSeen) {
			src = "tcp_info: time since the FIN"
		}
		f.Details = append(f.Details, fmt.Sprintf("Since: the oldest CLOSE_WAIT socket (%s → %s) has waited since %s, %s before the last sample (%s).",
			oldest.Local, oldest.Remote, oldest.Since().UTC().Format(time.RFC3339), human.Age(oldest.AgeAt(a.End)), src))
	}
	f.Details = append(f.Details, rateLine(p))
	if line := recvQLine(p.CloseWaitSockets); line != "" {
		f.Details = append(f.Details, line)
	}
	if tr.Verdict == Draining {
		// Closing is what a healthy client does; no cause to look for.
		return f, true
	}
	f.Causes = closeWaitCauses(p)
	return f, true
}

// connLeakFinding reports ESTABLISHED growth with new local ports: each new
// client instance opens its own connections and keeps them.
func connLeakFinding(a *Analysis, p *ProcessSeries) (Finding, bool) {
	tr := p.Established
	if tr.Verdict != Growing {
		return Finding{}, false
	}
	f := Finding{Severity: Warning, Kind: KindConnLeak, Process: p.Key, Name: p.Name()}
	f.Summary = fmt.Sprintf("ESTABLISHED connections growing in %s (%s): %d → %d in %s, %s",
		p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), rate(tr.PerMinute))
	f.Details = append(f.Details, processLine(p))
	if line := remotesLine(p, false); line != "" {
		f.Details = append(f.Details, line)
	}
	f.Details = append(f.Details, fmt.Sprintf("Local ports: %d distinct local ports over the window for %d connections held at the end.",
		p.LocalPorts, tr.Last+p.CloseWait.Last))
	f.Causes = []Cause{{Text: "Producers (or other clients) created and never closed: each new instance opens its own connections to the brokers and keeps them. " +
		"Create one producer per application, share it, and call close() when done."}}
	return f, true
}

func processLine(p *ProcessSeries) string {
	var b strings.Builder
	if p.Key.PID == 0 {
		b.WriteString("Process: none found: run kdiag as root (or as the sockets' owner) to attribute these sockets.")
		return b.String()
	}
	fmt.Fprintf(&b, "Process: %s, pid %d", p.Name(), p.Key.PID)
	if p.Process.User != "" {
		fmt.Fprintf(&b, ", user %s", p.Process.User)
	}
	if !p.Key.Start.IsZero() {
		fmt.Fprintf(&b, ", started %s", p.Key.Start.UTC().Format(time.RFC3339))
	}
	if p.Process.Container != "" {
		fmt.Fprintf(&b, ", container %s", shortID(p.Process.Container))
	}
	if p.Process.Kafka != "" {
		fmt.Fprintf(&b, "; Kafka client (%s)", p.Process.Kafka)
	}
	if c := p.Process.Cmdline; c != "" {
		fmt.Fprintf(&b, "; command: %s", truncate(c, 160))
	}
	b.WriteString(".")
	return b.String()
}

func shortID(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// remotesLine names where the CLOSE_WAIT sockets point, brokers first.
func remotesLine(p *ProcessSeries, closeWaitOnly bool) string {
	type rc struct {
		name   string
		broker bool
		cw, es int
	}
	var list []rc
	for _, r := range p.Remotes {
		last := r.Last
		if last.Get(netstat.CloseWait) == 0 && (closeWaitOnly || last.Get(netstat.Established) == 0) {
			continue
		}
		list = append(list, rc{r.Name(), r.Broker, last.Get(netstat.CloseWait), last.Get(netstat.Established)})
	}
	if len(list) == 0 {
		return ""
	}
	slices.SortStableFunc(list, func(x, y rc) int {
		if x.broker != y.broker {
			if x.broker {
				return -1
			}
			return 1
		}
		return (y.cw + y.es) - (x.cw + x.es)
	})
	const show = 5
	parts := make([]string, 0, show)
	for i, r := range list {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(list)-show))
			break
		}
		s := fmt.Sprintf("%s (%d CLOSE_WAIT, %d ESTABLISHED", r.name, r.cw, r.es)
		if r.broker {
			s += ", broker"
		}
		parts = append(parts, s+")")
	}
	return "Toward: " + strings.Join(parts, ", ") + "."
}

func rateLine(p *ProcessSeries) string {
	tr, rc := p.CloseWait, p.CloseWaitRecent
	s := fmt.Sprintf("Rate: %s (±%.1f, least-squares over %d samples in %s; min %d, max %d)",
		rate(tr.PerMinute), tr.StdErr, tr.Samples, human.Age(tr.Span), tr.Min, tr.Max)
	if rc.Verdict != TooShort && rc.Samples < tr.Samples {
		s += fmt.Sprintf("; over the last %s: %s, %s", human.Age(rc.Span), verdictWord(rc.Verdict), rate(rc.PerMinute))
	}
	if p.Closed > 0 {
		s += fmt.Sprintf("; %d CLOSE_WAIT closed during the window", p.Closed)
	}
	return s + "."
}

// recvQLine says what the Recv-Q of the held CLOSE_WAIT sockets tells, in
// netstat.ExplainRecvQ's words (the FIN counts one in Recv-Q on Linux), the
// commonest first.
func recvQLine(cw []CloseWaitSocket) string {
	if len(cw) == 0 {
		return ""
	}
	counts := make(map[string]int)
	var order []string
	for _, c := range cw {
		e := netstat.ExplainRecvQ(netstat.Socket{State: netstat.CloseWait, RecvQ: c.RecvQ})
		if counts[e] == 0 {
			order = append(order, e)
		}
		counts[e]++
	}
	slices.SortStableFunc(order, func(x, y string) int { return counts[y] - counts[x] })
	const show = 3
	var parts []string
	for i, e := range order {
		if i == show {
			parts = append(parts, fmt.Sprintf("%d more with other Recv-Q values", len(cw)-sumCounts(counts, order[:show])))
			break
		}
		parts = append(parts, fmt.Sprintf("%d of %d: %s", counts[e], len(cw), e))
	}
	return "Recv-Q: " + strings.Join(parts, "; ") + "."
}

func sumCounts(m map[string]int, keys []string) int {
	n := 0
	for _, k := range keys {
		n += m[k]
	}
	return n
}

// closeWaitCauses orders the likely causes by what Recv-Q and the process
// say. The lint rules named are kdiag lint's: KD101 flags
// connections.max.idle.ms disabled (-1), KD102 an idle timeout at or above
// the broker's, either of which leaves the broker to close first.
func closeWaitCauses(p *ProcessSeries) []Cause {
	var unread, read int
	for _, c := range p.CloseWaitSockets {
		if c.RecvQ == 0 {
			read++
		} else {
			unread++
		}
	}
	idle := Cause{
		Text: "The broker closes idle connections before the client does: the client's idle timeout is disabled or above the broker's " +
			"connections.max.idle.ms (600000 ms by default). Set the producer's connections.max.idle.ms below the broker's; check the config with kdiag lint.",
		Rules: []string{"KD101", "KD102"},
	}
	noRead := Cause{Text: "The client does not read idle connections, so it never sees the broker's FIN: Sarama, franz-go and kafka-go read a connection only " +
		"while a response is pending. Close idle connections on the client side (its idle timeout below the broker's) or upgrade to a client version that does."}
	blocked := Cause{Text: "The client's network thread is blocked and cannot react to the FIN, e.g. a slow send callback running on the I/O thread. " +
		"Take a thread dump (jstack " + fmt.Sprint(p.Key.PID) + ") and look at kafka-producer-network-thread; keep callbacks short."}
	notClosed := Cause{Text: "The application read the EOF and dropped the connection without close(): producers (or their connections) created and never closed. " +
		"Create one producer per application and call close() when done."}
	jvm := strings.Contains(p.Process.Cmdline, "java") || strings.Contains(p.Process.Kafka, "kafka-clients") || p.Process.Name == "java"
	if strings.Contains(p.Process.Kafka, "librdkafka") {
		// librdkafka's idle close is off by default (0), and KD104 checks
		// whether keepalive is off too.
		idle.Rules = []string{"KD104", "KD102"}
	}
	var out []Cause
	switch {
	case read > unread:
		out = []Cause{notClosed, idle}
	case jvm:
		// Java's Selector reads every registered connection, so an unread
		// FIN there means the thread that would read it is stuck.
		out = []Cause{blocked, idle}
	default:
		out = []Cause{idle, noRead, blocked}
	}
	if p.Established.Verdict == Growing || (p.LocalPorts > 2*(p.CloseWait.Max+p.Established.Max) && p.CloseWait.Verdict == Growing) {
		out = append(out, Cause{Text: fmt.Sprintf("Producers created and never closed: ESTABLISHED %s and the process used %d distinct local ports. "+
			"Create one producer per application and call close() when done.", verdictWord(p.Established.Verdict), p.LocalPorts)})
	}
	return out
}

func verdictWord(v Verdict) string {
	switch v {
	case Growing:
		return "growing"
	case Draining:
		return "draining"
	case Steady:
		return "holding"
	}
	return "too short to tell"
}

func rate(perMin float64) string {
	return fmt.Sprintf("%+.1f/min", perMin)
}
