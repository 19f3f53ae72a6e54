package analyzer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/internal/human"
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

// UnmarshalText reads a severity's name, as MarshalText writes it.
func (s *Severity) UnmarshalText(b []byte) error {
	for _, v := range []Severity{Info, Warning, Critical} {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", b)
}

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
	// Evidence are the few of Details the finding rests on (its age, the
	// broker's idle close, the rate, Recv-Q): what a short report shows.
	Evidence []string `json:"evidence,omitempty"`
	// Causes are the likely causes, most likely first, with what to do.
	Causes []Cause `json:"causes"`
}

// Cause is a likely cause: an ID, what it is (Title), what to do about it
// in the client's own terms (Fix), the evidence it rests on, and the lint
// rules that check for it. Text is Title and Fix in one line, what watch
// and the reports print.
type Cause struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Fix      string   `json:"fix"`
	Evidence []string `json:"evidence,omitempty"`
	Text     string   `json:"text"`
	Rules    []string `json:"rules,omitempty"`
	// Ends says what will end the state if nothing is changed: the
	// library's next write or its reaper, nothing; "" when not known.
	Ends string `json:"ends,omitempty"`
}

// Evidence is what is known of a process beyond its sockets, which the
// diagnosis weighs: the client library (watch and report have that from
// identification), and what kdiag doctor reads besides: its threads, its
// configuration's lint findings and the sockets it holds closed.
type Evidence struct {
	Client clients.Client
	// Threads are its client's threads over doctor's samples; nil when
	// not read.
	Threads *clients.Threads
	// Config are the lint findings of the configuration found for it.
	Config []ConfigFact
	// HeldClosed counts the TCP sockets it holds that are in no kernel
	// table (state CLOSE: reset, or closed by keepalive, and never
	// closed by the process); -1 when not counted.
	HeldClosed int
	// FDs is the process's fd census and its open count over the scans;
	// nil when not read.
	FDs *FDEvidence
	// Sysctls are the TCP sysctls of its network namespace
	// (tcp_fin_timeout, keepalive); nil when not read.
	Sysctls *netstat.TCPSysctls
	// IdleConfigured is the client's idle setting as its configuration
	// sets it, with where ("2000 at app.properties:3"); "" when not read.
	IdleConfigured string
	// Ports is the ephemeral port range of its namespace and the sockets
	// toward each of its brokers, any holder's (CountPorts); nil when
	// not counted.
	Ports *PortEvidence
}

// ConfigFact is one lint finding of a process's configuration, as the
// diagnosis cites it.
type ConfigFact struct {
	Rule string `json:"rule"`
	// Where is "path:line" (or the environment variable) it was found at.
	Where   string `json:"where"`
	Message string `json:"message"`
}

// diagnose writes the findings for every process of a, worst first.
func diagnose(a *Analysis, opts Options) []Finding {
	var out []Finding
	for i := range a.Processes {
		p := &a.Processes[i]
		out = append(out, Diagnose(a, p, Evidence{Client: p.Client, HeldClosed: -1}, opts)...)
	}
	slices.SortStableFunc(out, func(x, y Finding) int { return int(y.Severity) - int(x.Severity) })
	return out
}

// Diagnose writes the findings for one process of a, worst first, from its
// sockets over the window and ev. It is the one engine behind every
// diagnosis kdiag prints: watch's and the reports' (ev has the client),
// doctor's (ev has its threads, configuration and held sockets too). A
// process that is no Kafka client gets no Kafka cause, and one that is no
// JVM no Java cause.
func Diagnose(a *Analysis, p *ProcessSeries, ev Evidence, opts Options) []Finding {
	opts = opts.withDefaults()
	var out []Finding
	cw, cwOK := closeWaitFinding(a, p, ev, opts)
	if cwOK {
		out = append(out, cw)
	}
	if f, ok := connLeakFinding(a, p, ev); ok {
		out = append(out, f)
	}
	if f, ok := instancesFinding(p, ev); ok {
		out = append(out, f)
	} else if f, ok := instancesManyFinding(p, ev); ok {
		out = append(out, f)
	}
	if f, ok := fdLimitFinding(p, ev, opts); ok {
		out = append(out, f)
	}
	if f, ok := reconnectFinding(a, p, ev); ok {
		out = append(out, f)
	}
	if f, ok := heldClosedFinding(p, ev); ok {
		out = append(out, f)
	}
	if !cwOK {
		// A blocked network thread is a finding of its own only before it
		// has left CLOSE_WAIT behind; after, it is that finding's cause.
		if f, ok := blockedThreadFinding(p, ev); ok {
			out = append(out, f)
		}
	}
	// Last among equals: what the sockets show comes before what the
	// version suggests.
	out = append(out, knownBugFindings(p, ev)...)
	slices.SortStableFunc(out, func(x, y Finding) int { return int(y.Severity) - int(x.Severity) })
	return out
}

func closeWaitFinding(a *Analysis, p *ProcessSeries, ev Evidence, opts Options) (Finding, bool) {
	tr := p.CloseWait
	f := Finding{Process: p.Key, Name: p.Name()}
	oldest, age, hasOld := p.Oldest(a)
	byDesign := p.Last.Get(netstat.CloseWait) > 0 && holdsByDesign(p, ev)
	switch {
	case tr.Verdict == Step:
		f.Severity, f.Kind = Warning, KindStep
		f.Summary = fmt.Sprintf("CLOSE_WAIT step in %s (%s): %d → %d sockets over %s, then holding: the broker closed %s the client had, and it has not closed them; a bounded step, not a leak",
			p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), human.Plural(tr.Max-tr.First, "idle connection"))
	case tr.Verdict == Growing:
		f.Severity, f.Kind = Critical, KindLeak
		f.Summary = fmt.Sprintf("CLOSE_WAIT leak in %s (%s): %d → %d sockets in %s, %s",
			p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), rate(tr.PerMinute))
	case tr.Verdict == Draining:
		f.Severity, f.Kind = Info, KindDraining
		f.Summary = fmt.Sprintf("CLOSE_WAIT draining in %s (%s): %d → %d sockets in %s, %s: the application is closing them",
			p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), rate(tr.PerMinute))
	case byDesign:
		// No age is needed: the library does not read idle connections,
		// so nothing but its next write or its reaper will close them.
		f.Severity, f.Kind = Warning, KindHeld
		f.Summary = fmt.Sprintf("%s (%s) holds %s that the broker closed, the oldest %s: %s does not read a connection it has nothing pending on",
			p.Name(), p.Key, leakedWords(p.Last), age.Words(), ev.Client.Catalog().Name)
	case hasOld && age.Likely() >= opts.StuckAge:
		f.Severity, f.Kind = Warning, KindHeld
		f.Summary = fmt.Sprintf("%s held by %s (%s), the oldest %s, not growing (%s over %s), never closed",
			leakedWords(p.Last), p.Name(), p.Key, age.Words(), verdictWord(tr.Verdict), human.Age(tr.Span))
	default:
		return Finding{}, false
	}
	f.Details = append(f.Details, processLine(p))
	if line := clientLine(ev.Client); line != "" {
		f.Details = append(f.Details, line)
	}
	if line := remotesLine(p, true); line != "" {
		f.Details = append(f.Details, line)
	}
	if hasOld && age.Known() {
		line := ageLine(oldest, age)
		f.Details = append(f.Details, line)
		f.Evidence = append(f.Evidence, line)
	}
	if line := brokerIdleLine(p); line != "" {
		f.Details = append(f.Details, line)
		f.Evidence = append(f.Evidence, line)
	}
	f.Details = append(f.Details, rateLine(p))
	if tr.Verdict != TooShort {
		f.Evidence = append(f.Evidence, rateLine(p))
	}
	if line := recvQLine(p.CloseWaitSockets); line != "" {
		f.Details = append(f.Details, line)
		f.Evidence = append(f.Evidence, line)
	}
	if tr.Verdict == Draining {
		// Closing is what a healthy client does; no cause to look for.
		return f, true
	}
	f.Causes = closeWaitCauses(a, p, ev, opts)
	return f, true
}

// holdsByDesign reports whether p runs a client library that does not
// read the connections it has nothing pending on (franz-go, Sarama,
// kafka-go) and holds CLOSE_WAIT sockets whose FIN it has not read: the
// broker closed them and the library will not notice until it writes on
// them again or reaps them. That is a finding at the first look, whatever
// the age.
func holdsByDesign(p *ProcessSeries, ev Evidence) bool {
	lib := ev.Client.Catalog()
	if lib == nil || lib.ReadsIdle || !isKafka(p, ev) {
		return false
	}
	for _, c := range p.CloseWaitSockets {
		if !c.Held && c.RecvQ > 0 {
			return true
		}
	}
	return false
}

// endsWords says what will end a broker-closed socket that lib holds in
// CLOSE_WAIT, and what keepalive makes of it meanwhile.
func endsWords(lib *clients.Library, held bool, ev Evidence) string {
	if lib.Ends == "" {
		return ""
	}
	s := lib.Ends + "."
	if lib.Language == "Go" && !held {
		s += " Meanwhile Go's keepalive (every 15 s) draws an RST once the broker's side has timed out (" + finTimeoutWords(ev) + "): the socket leaves the kernel's tables and the fd stays, a held CLOSE."
	}
	return s
}

// finTimeoutWords says how long the broker's side of a connection it
// closed lingers in FIN_WAIT_2: its host's net.ipv4.tcp_fin_timeout, which
// kdiag reads where it can, in the client's network namespace (the broker's
// when both run there, as on one host).
func finTimeoutWords(ev Evidence) string {
	if ev.Sysctls == nil || ev.Sysctls.FinTimeout <= 0 {
		return "the broker host's tcp_fin_timeout, 60 s by default"
	}
	return fmt.Sprintf("the broker host's tcp_fin_timeout; %s in this process's network namespace", human.Age(ev.Sysctls.FinTimeout))
}

// ageLine says how old the oldest CLOSE_WAIT socket is and how kdiag knows.
func ageLine(c CloseWaitSocket, b AgeBounds) string {
	how := "since the first scan that saw it"
	switch {
	case b.Exact():
		how = "tcp_info: the time since the FIN, exact"
	case b.HasMax && b.PeerIdle > 0:
		how = "tcp_info's last data plus the peer's idle timeout: the FIN of an idle close"
	case b.HasMax:
		how = "tcp_info: no later than the last ACK received (keepalive probes' ACKs reset it), no earlier than the last data"
	case !c.FINAt.IsZero() && c.FINAt.Before(c.FirstSeen):
		how = "tcp_info: the time since the last ACK received"
	}
	since := ""
	if b.Exact() || b.PeerIdle > 0 {
		since = ", since " + c.LastSeen.Add(-b.Likely()).UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("Age: the oldest CLOSE_WAIT socket (%s → %s) is %s%s (%s).", c.Local, c.Remote, b.Words(), since, how)
}

// Kinds of finding that kdiag doctor's evidence adds.
const (
	// KindStep: CLOSE_WAIT rose at once and holds: one idle close of
	// several connections, not a leak.
	KindStep = "close-wait-step"
	// KindInstancesGrowing: the client's instance threads grow: a
	// producer created per message or request and never closed.
	KindInstancesGrowing = "instances-growing"
	// KindHeldClosed: TCP sockets held open in state CLOSE, in no kernel
	// table.
	KindHeldClosed = "sockets-held-closed"
	// KindThreadBlocked: a network thread that must poll to see a FIN was
	// never seen polling.
	KindThreadBlocked = "network-thread-blocked"
)

// ShapeStep is CloseWaitShape's word for a bounded step (Step's name).
var ShapeStep = Step.String()

// CloseWaitShape says what the process's CLOSE_WAIT count did over the
// window: its verdict's name, "step" included (see Step and stepOf).
func CloseWaitShape(p *ProcessSeries, opts Options) string {
	return p.CloseWait.Verdict.String()
}

// BrokerIdle estimates the peer's idle timeout from the CLOSE_WAIT sockets
// whose idle time before the FIN is known: the median, the range and how
// many; ok false when none is known. For a broker that is its
// connections.max.idle.ms (Kafka's Selector closes a connection idle
// longer, on its next poll).
func BrokerIdle(p *ProcessSeries) (median, lo, hi time.Duration, n int, ok bool) {
	var idles []time.Duration
	for _, c := range p.CloseWaitSockets {
		if c.IdleAtFIN > 0 {
			idles = append(idles, c.IdleAtFIN)
		}
	}
	if len(idles) == 0 {
		return 0, 0, 0, 0, false
	}
	slices.Sort(idles)
	return idles[len(idles)/2], idles[0], idles[len(idles)-1], len(idles), true
}

// brokerIdleLine says after how long idle the peer closed the connections,
// and what to lint the client's configuration against.
func brokerIdleLine(p *ProcessSeries) string {
	med, lo, hi, n, ok := BrokerIdle(p)
	if !ok {
		return ""
	}
	spread := ""
	if human.Age(lo) != human.Age(hi) {
		spread = " (" + human.Age(lo) + "-" + human.Age(hi) + ")"
	}
	ms := med.Round(time.Second).Milliseconds()
	if med < 10*time.Second {
		ms = med.Round(100 * time.Millisecond).Milliseconds()
	}
	return fmt.Sprintf("Peer's idle close: the peer closed %s after ~%s idle%s (tcp_info: last data before the FIN): for a broker, its connections.max.idle.ms is about %d; kdiag lint --broker-idle-ms %d checks the client's own against it.",
		human.Plural(n, "connection"), human.Age(med), spread, ms, ms)
}

// leakedWords names a sample's leaked sockets: "5 CLOSE_WAIT sockets", or
// "3 CLOSE_WAIT and 2 held CLOSE sockets" when some were reset out of the
// kernel's tables.
func leakedWords(c Counts) string {
	if h := c.Get(netstat.Close); h > 0 {
		return fmt.Sprintf("%d CLOSE_WAIT and %d held CLOSE sockets", c.Get(netstat.CloseWait), h)
	}
	return human.Plural(c.Get(netstat.CloseWait), "CLOSE_WAIT socket")
}

// clientLine names the client library and its evidence.
func clientLine(c clients.Client) string {
	if !c.Identified() {
		if len(c.Evidence) > 1 {
			return "Client: not identified (" + strings.Join(c.Evidence[1:], "; ") + ")."
		}
		return ""
	}
	if len(c.Evidence) == 0 {
		return "Client: " + c.String() + "."
	}
	return "Client: " + c.String() + " (" + strings.Join(c.Evidence, "; ") + ")."
}

// connLeakFinding reports ESTABLISHED growth with new local ports: each new
// client instance opens its own connections and keeps them.
func connLeakFinding(a *Analysis, p *ProcessSeries, ev Evidence) (Finding, bool) {
	tr := p.Established
	if tr.Verdict != Growing {
		return Finding{}, false
	}
	f := Finding{Severity: Warning, Kind: KindConnLeak, Process: p.Key, Name: p.Name()}
	f.Summary = fmt.Sprintf("ESTABLISHED connections growing in %s (%s): %d → %d in %s, %s",
		p.Name(), p.Key, tr.First, tr.Last, human.Age(tr.Span), rate(tr.PerMinute))
	f.Details = append(f.Details, processLine(p))
	if line := clientLine(ev.Client); line != "" {
		f.Details = append(f.Details, line)
	}
	if line := remotesLine(p, false); line != "" {
		f.Details = append(f.Details, line)
	}
	f.Details = append(f.Details, fmt.Sprintf("Local ports: %d distinct local ports over the window for %d connections held at the end.",
		p.LocalPorts, tr.Last+p.CloseWait.Last))
	f.Causes = []Cause{notClosedCause(p, ev, fmt.Sprintf("ESTABLISHED %s over %s with %d distinct local ports", verdictWord(tr.Verdict), human.Age(tr.Span), p.LocalPorts))}
	return f, true
}

// instancesFinding reports a growing number of client instances (the
// producer-per-message leak), from the instance threads doctor counted.
func instancesFinding(p *ProcessSeries, ev Evidence) (Finding, bool) {
	lib := ev.Client.Catalog()
	if ev.Threads == nil || lib == nil || lib.Threads == nil || lib.Threads.Instance == "" {
		return Finding{}, false
	}
	c := ev.Threads.InstanceCounts
	if len(c) < 2 || c[len(c)-1] <= c[0] || !slices.IsSorted(c) {
		return Finding{}, false
	}
	f := Finding{Severity: Warning, Kind: KindInstancesGrowing, Process: p.Key, Name: p.Name()}
	f.Summary = fmt.Sprintf("%s instances growing in %s (%s): %d → %d %s threads over %d samples",
		lib.Name, p.Name(), p.Key, c[0], c[len(c)-1], lib.Threads.Full, len(c))
	f.Details = []string{processLine(p), clientLine(ev.Client),
		fmt.Sprintf("Threads: %s (%s).", lib.Threads.Fact.Says, lib.Threads.Fact.Source)}
	f.Causes = []Cause{notClosedCause(p, ev, fmt.Sprintf("%s threads: %v", lib.Threads.Instance, c))}
	return f, true
}

// heldClosedFinding reports TCP sockets the process holds in state CLOSE.
func heldClosedFinding(p *ProcessSeries, ev Evidence) (Finding, bool) {
	held := ev.HeldClosed
	if held < 0 {
		// watch and the reports: the held CLOSE sockets the scans listed.
		held = p.Last.Get(netstat.Close)
	}
	if held <= 0 {
		return Finding{}, false
	}
	f := Finding{Severity: Warning, Kind: KindHeldClosed, Process: p.Key, Name: p.Name()}
	f.Summary = fmt.Sprintf("%s held open by %s (%s) in state CLOSE: in no kernel table (ss and /proc/net/tcp do not list them), still open in the process",
		human.Plural(held, "TCP socket"), p.Name(), p.Key)
	f.Details = []string{processLine(p)}
	if line := clientLine(ev.Client); line != "" {
		f.Details = append(f.Details, line)
	}
	f.Details = append(f.Details, "How: fds of the process whose socket protocol is TCP (the sockfs attribute system.sockprotoname) and whose inode no TCP state lists.")
	f.Evidence = []string{fmt.Sprintf("Held: %s whose fd the process holds and no kernel table lists (ss shows nothing); keepalive reset them after the broker closed them.", human.Plural(held, "TCP socket"))}
	c := Cause{ID: "keepalive-reset-close-wait",
		Title: "CLOSE_WAIT sockets that keepalive turned into dead fds: once the broker's side of the connection timed out (" + finTimeoutWords(ev) + "), the client's next keepalive probe drew an RST and the socket left every kernel table; the process never closed the fd.",
		Fix:   "Fix what left them in CLOSE_WAIT; they count against the process's fd limit until it closes them or exits.",
	}
	if lib := ev.Client.Catalog(); lib != nil {
		c.Fix = lib.Fix + " The held fds count against the process's fd limit until it closes them or exits."
		c.Rules = lib.Rules
		c.Ends = endsWords(lib, true, ev)
		c.Evidence = []string{"Keepalive: " + lib.Keepalive.Says + " (" + lib.Keepalive.Source.String() + ")."}
	}
	f.Causes = []Cause{withText(c)}
	return f, true
}

// blockedThreadFinding reports network threads that must poll to see a
// FIN and were never seen polling.
func blockedThreadFinding(p *ProcessSeries, ev Evidence) (Finding, bool) {
	c, ok := blockedThreadCause(p, ev)
	if !ok {
		return Finding{}, false
	}
	f := Finding{Severity: Warning, Kind: KindThreadBlocked, Process: p.Key, Name: p.Name(),
		Summary: fmt.Sprintf("%s in %s (%s): it cannot see a broker's FIN", c.Title, p.Name(), p.Key)}
	f.Details = append([]string{processLine(p), clientLine(ev.Client)}, c.Evidence...)
	f.Causes = []Cause{c}
	return f, true
}

// blockedThreadCause is the cause a blocked network thread makes, when
// doctor sampled threads and the client's network threads are blind when
// not polling.
func blockedThreadCause(p *ProcessSeries, ev Evidence) (Cause, bool) {
	lib := ev.Client.Catalog()
	if ev.Threads == nil || lib == nil || lib.Threads == nil || !lib.Threads.StuckIsBlind {
		return Cause{}, false
	}
	var blocked []clients.NetworkThread
	for _, t := range ev.Threads.Network {
		if t.State == clients.Blocked {
			blocked = append(blocked, t)
		}
	}
	if len(blocked) == 0 {
		return Cause{}, false
	}
	c := Cause{ID: KindThreadBlocked,
		Title: fmt.Sprintf("%d of %d network threads is blocked (%s) and not polling", len(blocked), len(ev.Threads.Network), lib.Threads.Full),
		Fix:   lib.Fix, Rules: lib.Rules}
	for _, t := range blocked {
		c.Evidence = append(c.Evidence, fmt.Sprintf("Thread %d %q: %s, wchan %s; a polling thread waits in epoll_wait or poll.",
			t.TID, t.Name, t.Words(), orDash(t.Wchan)))
	}
	return withText(c), true
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
func recvQLine(all []CloseWaitSocket) string {
	// A held CLOSE socket has no Recv-Q the kernel reports: only the
	// sockets still in CLOSE_WAIT say how far the application read.
	var cw []CloseWaitSocket
	for _, c := range all {
		if !c.Held {
			cw = append(cw, c)
		}
	}
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

// isKafka reports whether the process is a Kafka client: identified,
// marked by the scan, or holding sockets to brokers (--brokers, else the
// default Kafka ports).
func isKafka(p *ProcessSeries, ev Evidence) bool {
	if ev.Client.Identified() || p.Process.Kafka != "" {
		return true
	}
	for _, r := range p.Remotes {
		if r.Broker || (!r.Other && slices.Contains(netstat.DefaultKafkaPorts, r.Remote.Port())) {
			return true
		}
	}
	return false
}

func isJVM(p *ProcessSeries, ev Evidence) bool {
	if ev.Client.Library != "" {
		return ev.Client.Language == "Java"
	}
	return p.Process.Name == "java" || strings.HasPrefix(p.Process.Cmdline, "java ") || strings.Contains(p.Process.Cmdline, "/java ")
}

// closeWaitCauses orders the likely causes by what Recv-Q, the client
// library and doctor's evidence say. The lint rules named are kdiag lint's
// (KD101: connections.max.idle.ms disabled, KD102: not below the broker's,
// KD104: librdkafka's idle close and keepalive both off), and come from the
// client's catalog entry.
func closeWaitCauses(a *Analysis, p *ProcessSeries, ev Evidence, opts Options) []Cause {
	var unread, read int
	for _, c := range p.CloseWaitSockets {
		if c.Held {
			continue // reset out of CLOSE_WAIT: no Recv-Q to read
		}
		if c.RecvQ == 0 {
			read++
		} else {
			unread++
		}
	}
	recvQ := fmt.Sprintf("Recv-Q: %d of %d CLOSE_WAIT sockets have the FIN unread", unread, unread+read)
	if !isKafka(p, ev) {
		// Nothing about Kafka for a process that is no Kafka client.
		if read > unread {
			return []Cause{eofNotClosed(recvQ), peerCloseUnread(recvQ)}
		}
		return []Cause{peerCloseUnread(recvQ), eofNotClosed(recvQ)}
	}
	lib := ev.Client.Catalog()
	var out []Cause
	switch {
	case read > unread:
		// The FIN was read: whatever the library, the code that read it
		// did not close.
		out = append(out, notClosedCause(p, ev, recvQ))
		if lib == nil {
			out = append(out, genericIdleCause())
		} else if lib.IdleSetting != "" {
			out = append(out, idleCause(a, p, lib, ev))
		}
	case lib == nil:
		out = append(out, genericKafkaCauses(p, ev, recvQ)...)
	case !lib.ReadsIdle:
		c := Cause{ID: "client-does-not-read-idle", Title: lib.CloseWait, Fix: lib.Fix, Rules: lib.Rules,
			Evidence: []string{recvQ + ".", "Reads: " + lib.Reads.Says + " (" + lib.Reads.Source.String() + ").",
				"Idle: " + lib.Idle.Says + " (" + lib.Idle.Source.String() + ")."}}
		if _, age, ok := p.Oldest(a); ok && lib.IdleDefault > 0 && age.Min > 2*lib.IdleDefault {
			c.Evidence = append(c.Evidence, fmt.Sprintf("The oldest is at least %s old, past 2x %s's default %s: the setting is raised, or the instances holding them were never closed.",
				human.Age(age.Min), lib.IdleSetting, human.Age(lib.IdleDefault)))
		}
		c.Ends = endsWords(lib, false, ev)
		out = append(out, withText(c))
		if lib.IdleSetting != "" {
			out = append(out, idleCause(a, p, lib, ev))
		}
	default:
		// A blocked network thread holds CLOSE_WAIT whatever the idle
		// settings (measured: the client's 2000 ms against the broker's
		// 3000, blocked, every socket stayed 27 s): the idle cause is no
		// alternative then.
		if c, ok := blockedThreadCause(p, ev); ok {
			out = append([]Cause{c}, out...)
		} else {
			out = append(out, readsIdleCause(lib, ev, recvQ))
			if lib.IdleSetting != "" {
				out = append(out, idleCause(a, p, lib, ev))
			}
		}
	}
	// A cause the configuration confirms goes first.
	slices.SortStableFunc(out, func(x, y Cause) int { return boolCmp(!confirmed(x), !confirmed(y)) })
	switch perBroker := connectionsPerBroker(p); {
	case p.CloseWait.Verdict == Growing && perBroker > maxPerBroker:
		// One client holds a few connections to a broker; CLOSE_WAIT that
		// grows past that toward one broker is many clients, each left
		// behind once the broker closed its idle connection.
		out = append([]Cause{notClosedCause(p, ev, fmt.Sprintf("%d connections to one broker (CLOSE_WAIT and ESTABLISHED), where one client holds at most a few, and growing", perBroker))}, out...)
	case p.Established.Verdict == Growing || (p.LocalPorts > 2*(p.CloseWait.Max+p.Established.Max) && p.CloseWait.Verdict == Growing):
		out = append(out, notClosedCause(p, ev, fmt.Sprintf("ESTABLISHED %s and the process used %d distinct local ports", verdictWord(p.Established.Verdict), p.LocalPorts)))
	}
	return out
}

// maxPerBroker is the most connections one client instance holds to one
// broker: franz-go keeps up to three (produce, fetch, and a third for
// metadata and admin requests), Sarama and the Java producer one, kafka-go
// a small pool; with the bootstrap connection to the same address, four.
const maxPerBroker = 4

// connectionsPerBroker is the most connections (CLOSE_WAIT, held CLOSE
// and ESTABLISHED) the process holds to any one remote at the last sample.
func connectionsPerBroker(p *ProcessSeries) int {
	n := 0
	for _, r := range p.Remotes {
		if !r.Other {
			n = max(n, r.Last.Leaked()+r.Last.Get(netstat.Established))
		}
	}
	return n
}

// confirmed reports whether what doctor read backs a cause: a lint
// finding of the configuration found, or a blocked thread seen.
func confirmed(c Cause) bool {
	for _, e := range c.Evidence {
		if strings.HasPrefix(e, "Config: ") || strings.HasPrefix(e, "Thread ") {
			return true
		}
	}
	return false
}

func withText(c Cause) Cause {
	c.Text = sentence(c.Title) + " " + c.Fix
	return c
}

// sentence ends s with a full stop.
func sentence(s string) string {
	if s == "" || strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// idleCause: the broker closes first because the client's idle timeout is
// off or not below the broker's; confirmed by the config's lint findings.
func idleCause(a *Analysis, p *ProcessSeries, lib *clients.Library, ev Evidence) Cause {
	client := fmt.Sprintf("default %s", lib.IdleDefaultString())
	if ev.IdleConfigured != "" {
		client = "set to " + ev.IdleConfigured
	}
	c := Cause{ID: "idle-timeout-not-below-broker",
		Title: fmt.Sprintf("The broker closes idle connections before the client does: %s's %s (%s) is disabled or not below the broker's connections.max.idle.ms (%s).",
			lib.Name, lib.IdleSetting, client, brokerIdleWords(a, p)),
		Fix:   fmt.Sprintf("Set %s below the broker's connections.max.idle.ms.", lib.IdleSetting),
		Rules: lib.Rules}
	if len(lib.Rules) > 0 {
		c.Fix += " Check the config with kdiag lint."
	}
	c.Evidence = append(c.Evidence, "Idle: "+lib.Idle.Says+" ("+lib.Idle.Source.String()+").")
	for _, f := range ev.Config {
		if slices.Contains(lib.Rules, f.Rule) {
			c.Evidence = append(c.Evidence, fmt.Sprintf("Config: %s: %s [%s]", f.Where, f.Message, f.Rule))
		}
	}
	return withText(c)
}

// brokerIdleWords says the broker's idle timeout as kdiag knows it: given,
// measured off the sockets, or Kafka's default.
func brokerIdleWords(a *Analysis, p *ProcessSeries) string {
	switch idle, how := PeerIdleOf(a, p); how {
	case "given":
		return fmt.Sprintf("%d ms, as --broker-idle-ms gives it", idle.Milliseconds())
	case "":
		return "600000 ms by default"
	default:
		return fmt.Sprintf("about %s here, as its closes of these connections showed", human.Age(idle))
	}
}

// readsIdleCause: a client that reads idle connections left the FIN
// unread: its reader is not running, or the sockets are not its own.
func readsIdleCause(lib *clients.Library, ev Evidence, recvQ string) Cause {
	c := Cause{ID: "reader-not-running", Title: lib.CloseWait, Fix: lib.Fix, Rules: lib.Rules,
		Evidence: []string{recvQ + ".", "Reads: " + lib.Reads.Says + " (" + lib.Reads.Source.String() + ")."}}
	if ev.Threads != nil && len(ev.Threads.Network) > 0 {
		states := map[string]int{}
		for _, t := range ev.Threads.Network {
			states[t.State]++
		}
		c.Evidence = append(c.Evidence, fmt.Sprintf("Threads: %d network threads over %d samples: %d polling, %d busy, %d blocked; polling threads can read a FIN, so these sockets may not be the client's own.",
			len(ev.Threads.Network), ev.Threads.Samples, states[clients.Polling], states[clients.Busy], states[clients.Blocked]))
	}
	return withText(c)
}

// notClosedCause: instances (or connections) dropped without close().
func notClosedCause(p *ProcessSeries, ev Evidence, why string) Cause {
	c := Cause{ID: "clients-not-closed",
		Title:    "Clients created and never closed, or connections dropped without close(): each new instance opens its own connections to the brokers and keeps them.",
		Evidence: []string{why + "."}}
	switch lib := ev.Client.Catalog(); {
	case lib != nil && lib.ID == clients.KafkaClients, lib == nil && isJVM(p, ev):
		// The Java entry's fix is for its blocked network thread; this
		// cause is the instances.
		c.Fix = "Create one KafkaProducer per application, share it across threads (it is thread-safe), and call close() when done: each instance keeps a network thread, a Selector (an epoll fd and an eventfd) and its connections."
	case lib != nil:
		c.Fix = lib.Fix
	default:
		c.Fix = "Create one client (producer) per application, share it, and close it when done."
	}
	return withText(c)
}

// genericKafkaCauses are the causes for a Kafka client kdiag could not
// identify: the idle close, a client that does not read idle connections,
// a blocked network thread (in Java's terms only for a JVM).
func genericKafkaCauses(p *ProcessSeries, ev Evidence, recvQ string) []Cause {
	idle := genericIdleCause()
	noRead := withText(Cause{ID: "client-does-not-read-idle",
		Title:    "The client does not read idle connections, so it never sees the broker's FIN: Sarama, franz-go and kafka-go read a connection only while a response is pending.",
		Fix:      "Close idle connections on the client side (its idle timeout below the broker's) or upgrade to a client version that does.",
		Evidence: []string{recvQ + "."}})
	blocked := Cause{ID: "reader-not-running",
		Title:    "The client's network thread is blocked and cannot react to the FIN, e.g. a slow send callback running on the I/O thread.",
		Fix:      "Keep callbacks short and off the client's I/O thread or event loop.",
		Evidence: []string{recvQ + "."}}
	if isJVM(p, ev) {
		blocked.Fix = "Take a thread dump (jstack " + fmt.Sprint(p.Key.PID) + ") and look at kafka-producer-network-thread; keep callbacks short."
		return []Cause{withText(blocked), idle}
	}
	return []Cause{idle, noRead, withText(blocked)}
}

func genericIdleCause() Cause {
	return withText(Cause{ID: "idle-timeout-not-below-broker",
		Title: "The broker closes idle connections before the client does: the client's idle timeout is disabled or above the broker's connections.max.idle.ms (600000 ms by default).",
		Fix:   "Set the client's idle timeout below the broker's (connections.max.idle.ms in the Java client and librdkafka, kgo.ConnIdleTimeout in franz-go, Transport.IdleTimeout in kafka-go); check a config file with kdiag lint.",
		Rules: []string{"KD101", "KD102"}})
}

// peerCloseUnread and eofNotClosed are the causes for a process that is no
// Kafka client: plain TCP.
func peerCloseUnread(recvQ string) Cause {
	return withText(Cause{ID: "peer-close-unread",
		Title:    "The application does not read these connections, so it never sees the peer's FIN and never closes them.",
		Fix:      "Read idle connections (a read returns end of stream when the peer closes) or close them after an idle timeout shorter than the peer's.",
		Evidence: []string{recvQ + "."}})
}

func eofNotClosed(recvQ string) Cause {
	return withText(Cause{ID: "eof-not-closed",
		Title:    "The application read the end of stream and did not close the socket.",
		Fix:      "Close the connection on the path that handles end of stream and read errors.",
		Evidence: []string{recvQ + "."}})
}

func verdictWord(v Verdict) string {
	switch v {
	case Step:
		return "a step, then holding"
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
