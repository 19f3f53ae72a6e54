// Package doctor joins what kdiag knows of each Kafka client process into
// one report: its client library and version (package clients), its
// instances and network threads (sampled several times, to tell a busy
// thread from a stuck one), its sockets (CLOSE_WAIT, held CLOSE,
// ESTABLISHED to brokers) and their ages, the configuration it runs with
// and its lint findings (packages procconfig, rules), and a ranked
// diagnosis from the analyzer's one engine (analyzer.Diagnose).
package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/fds"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/redact"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/procconfig"
	"github.com/kdiag/kdiag/rules"
)

// Options configure Run. Its function fields are the sources of what the
// report says; nil means the real one under ProcRoot (tests set fakes).
type Options struct {
	ProcRoot string
	// Query selects the processes (PIDs, Process) and the brokers; its
	// States are ignored: doctor reads every state.
	Query netstat.Query
	// Duration, when positive, samples for that long, every Interval
	// (default 1s), for a verdict; 0 takes one scan.
	Duration, Interval time.Duration
	// ThreadSamples are taken ThreadEvery apart at the end (default 5,
	// 200ms): a thread seen polling once is polling.
	ThreadSamples int
	ThreadEvery   time.Duration
	// StuckAge is the CLOSE_WAIT age past which a socket that does not
	// grow is a finding (default 1m, as watch's --stuck-age).
	StuckAge time.Duration
	// BrokerIdleMS is the broker's connections.max.idle.ms the lint
	// compares with (default 600000). Unless BrokerIdleGiven, the idle time
	// the broker's closes showed (analyzer.BrokerIdle) replaces it.
	BrokerIdleMS    int64
	BrokerIdleGiven bool

	Scan     func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error)
	Identify func(netstat.Process) clients.Client
	Threads  func(pid int) ([]clients.ThreadSample, error)
	Config   func(pid int, c clients.Client) []procconfig.Source
	ReadProc func(pid int) (netstat.Process, error)
	// FDs takes a process's fd census (fds.Read under ProcRoot).
	FDs func(pid int) (fds.Census, error)
	// Sysctls reads the TCP sysctls of a process's network namespace
	// (tcp_fin_timeout, keepalive), which the diagnosis's wording cites.
	Sysctls func(pid int) (netstat.TCPSysctls, error)
	// Holds says whether a process's fd still holds a socket
	// (netstat.FDHolds under ProcRoot). A scan that lists sockets in
	// CLOSE that an fd holds is checked again HeldRecheck later (default
	// 200ms): those the process closed meanwhile were a close in
	// progress, not held (netstat.Snapshot.DropReleased).
	Holds       func(pid, fd int, inode uint64) bool
	HeldRecheck time.Duration
	// Sleep waits between samples; nil is a timer on ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	Arch  string
}

func (o *Options) defaults() {
	o.ProcRoot = cmp.Or(o.ProcRoot, "/proc")
	o.Interval = cmp.Or(o.Interval, time.Second)
	o.ThreadSamples = cmp.Or(o.ThreadSamples, 5)
	o.ThreadEvery = cmp.Or(o.ThreadEvery, 200*time.Millisecond)
	o.StuckAge = cmp.Or(o.StuckAge, time.Minute)
	o.BrokerIdleMS = cmp.Or(o.BrokerIdleMS, int64(rules.DefaultBrokerIdleMS))
	o.Arch = cmp.Or(o.Arch, clients.HostArch)
	if o.Scan == nil {
		sc := netstat.NewScanner(o.ProcRoot)
		o.Scan = sc.Scan
	}
	if o.Identify == nil {
		o.Identify = clients.Identifier(o.ProcRoot)
	}
	if o.Threads == nil {
		o.Threads = func(pid int) ([]clients.ThreadSample, error) { return clients.ReadThreads(o.ProcRoot, pid) }
	}
	if o.Config == nil {
		o.Config = func(pid int, c clients.Client) []procconfig.Source { return procconfig.Find(o.ProcRoot, pid, c) }
	}
	if o.ReadProc == nil {
		o.ReadProc = func(pid int) (netstat.Process, error) {
			return netstat.ReadProcess(context.Background(), o.ProcRoot, pid)
		}
	}
	if o.Sysctls == nil {
		o.Sysctls = netstat.NewSysctlCache(o.ProcRoot).NetSysctls
	}
	if o.FDs == nil {
		o.FDs = func(pid int) (fds.Census, error) { return fds.Read(o.ProcRoot, pid) }
	}
	o.HeldRecheck = cmp.Or(o.HeldRecheck, 200*time.Millisecond)
	if o.Holds == nil {
		o.Holds = func(pid, fd int, inode uint64) bool { return netstat.FDHolds(o.ProcRoot, pid, fd, inode) }
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
}

// Report is what doctor found: the single record every output format is
// written from.
type Report struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Samples int       `json:"samples"`
	// Processes are the Kafka client processes (or the ones named), worst
	// first.
	Processes []Process `json:"processes"`
	Notes     []string  `json:"notes,omitempty"`
	// Blind is set when doctor could not see what it was asked to (a named
	// process it could not read, sockets it could not attribute): exit 3.
	Blind bool `json:"blind"`
	// BlindReason says, when Blind, what was not seen and why.
	BlindReason string `json:"blind_reason,omitempty"`
}

// Process is one process's part of the report.
type Process struct {
	PID  int    `json:"pid"`
	Name string `json:"name"`
	// Cmdline is the command line with secrets masked.
	Cmdline   string         `json:"cmdline"`
	User      string         `json:"user,omitempty"`
	Container string         `json:"container,omitempty"`
	Client    clients.Client `json:"client"`
	// Instances is the number of client instances its threads show; nil
	// when the library starts no thread per instance.
	Instances      *int                    `json:"instances"`
	NetworkThreads []clients.NetworkThread `json:"network_threads"`
	ThreadSamples  int                     `json:"thread_samples"`
	// Sockets counts its TCP sockets by state at the last scan; CLOSE
	// counts the ones held open in no kernel table.
	Sockets map[string]int `json:"sockets"`
	// BrokerSockets counts its sockets to brokers by state.
	BrokerSockets map[string]int `json:"broker_sockets"`
	// OldestCloseWait is what is known of the age of its likely oldest
	// CLOSE_WAIT socket (analyzer.AgeBounds: at least, at most, and the
	// broker's idle timeout that narrowed it); nil when it holds none or
	// nothing is known of their ages.
	OldestCloseWait *analyzer.AgeBounds `json:"oldest_close_wait,omitempty"`
	// BrokerIdleMS is the broker's idle timeout as its closes of this
	// process's connections showed it (the idle time before each FIN), 0
	// when unknown; the config was linted against it.
	BrokerIdleMS int64 `json:"broker_idle_ms,omitempty"`
	// Verdict is what its CLOSE_WAIT count did over the samples (step,
	// growing, draining, steady, too-short).
	Verdict     string       `json:"verdict"`
	ConfigFiles []ConfigFile `json:"config_files"`
	Findings    []Finding    `json:"findings"`
	// FDs is its fd census at the end (fds by kind, its limit) and, over
	// --duration, their growth; nil when kdiag could not read its fds.
	FDs *FDReport `json:"fds,omitempty"`
	// NoFinding says, when it holds CLOSE_WAIT or held CLOSE sockets and
	// no finding of warning or worse was made, why not and what would
	// make one.
	NoFinding string `json:"no_finding,omitempty"`
}

// FDReport is what doctor read of a process's fds.
type FDReport struct {
	fds.Census
	// PerMinute is the open count's growth over --duration (0 for one
	// look); UntilLimit the time left to the soft limit at that rate, 0
	// when not growing toward one.
	PerMinute  float64       `json:"growth_per_minute,omitempty"`
	UntilLimit time.Duration `json:"until_limit_ns,omitempty"`
}

// ConfigFile is one configuration found and its lint findings.
type ConfigFile struct {
	Path     string        `json:"path"`
	How      string        `json:"how"`
	Dialect  string        `json:"dialect,omitempty"`
	Error    string        `json:"error,omitempty"`
	Findings []LintFinding `json:"findings"`
}

// LintFinding is a kdiag lint finding where the config was found.
type LintFinding struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Where    string `json:"where"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

// Finding is one diagnosis: id, severity, title, the evidence (all of it,
// and the few lines it rests on), what will end the state, the fix in the
// client's own terms and the lint rules it relates to, then the ranked
// causes it weighed.
type Finding struct {
	ID       string            `json:"id"`
	Severity analyzer.Severity `json:"severity"`
	Title    string            `json:"title"`
	Evidence []string          `json:"evidence"`
	// KeyEvidence are the lines of Evidence the finding rests on: what the
	// short text shows.
	KeyEvidence []string         `json:"key_evidence,omitempty"`
	Ends        string           `json:"ends,omitempty"`
	Fix         string           `json:"fix"`
	Rules       []string         `json:"rules,omitempty"`
	Causes      []analyzer.Cause `json:"causes,omitempty"`
}

// KindNotIdentified is the finding for a Kafka client kdiag could not name.
const KindNotIdentified = "client-not-identified"

// Run examines the processes and returns the report. It returns an error
// only when the first scan fails; later failures are notes.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	q := o.Query
	q.States = netstat.AllStates
	// TIME_WAIT toward the brokers has no holder: kept, to count the
	// ephemeral ports a reconnecting client spends (analyzer.CountPorts).
	q.KeepOthers = true
	// The brokers mark sockets and processes here, they filter nothing:
	// doctor counts every socket of a client, and a held CLOSE socket has
	// no remote address a broker filter could match.
	isB := netstat.IsBroker(q.Brokers)
	q.Brokers = nil
	aopts := analyzer.Options{StuckAge: o.StuckAge, IsBroker: isB, Identify: o.Identify}
	if o.BrokerIdleGiven {
		aopts.BrokerIdle = time.Duration(o.BrokerIdleMS) * time.Millisecond
	}
	tracker := analyzer.NewTracker(aopts)
	rep := &Report{}
	last, perPID, fdSeries, err := o.sample(ctx, q, tracker, rep)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, last.Notes...)
	blindness(rep, last)
	a := tracker.Analysis()
	series := map[int]*analyzer.ProcessSeries{}
	for i := range a.Processes {
		series[a.Processes[i].Key.PID] = &a.Processes[i]
	}
	pids := o.selectPIDs(rep, last, series, q, isB)
	samples := o.sampleThreads(ctx, pids)
	for _, pid := range pids {
		ps := series[pid]
		if ps == nil {
			meta, _ := o.ReadProc(pid)
			meta.Cmdline = redact.Line(meta.Cmdline)
			ps = &analyzer.ProcessSeries{Key: analyzer.ProcessKey{PID: pid, Start: meta.StartTime}, Process: meta, Client: o.Identify(meta)}
		}
		rep.Processes = append(rep.Processes, o.process(a, ps, samples[pid], perPID[pid], fdSeries[pid], last, aopts))
	}
	slices.SortStableFunc(rep.Processes, func(x, y Process) int {
		return cmp.Or(cmp.Compare(worst(y.Findings), worst(x.Findings)), cmp.Compare(x.PID, y.PID))
	})
	return rep, nil
}

// sample scans once, or every Interval for Duration, into tracker, and
// returns the last snapshot, the instance counts seen per scan by pid, and
// the open fds of the Kafka clients at each scan. Only the first scan's
// failure is an error; later ones are notes.
func (o *Options) sample(ctx context.Context, q netstat.Query, tracker *analyzer.Tracker, rep *Report) (*netstat.Snapshot, map[int][]int, map[int]*analyzer.FDEvidence, error) {
	var last *netstat.Snapshot
	perPID := map[int][]int{}
	fdSeries := map[int]*analyzer.FDEvidence{}
	deadline := time.Time{}
	for {
		at := time.Now()
		var slept time.Duration
		s, err := o.Scan(ctx, q)
		if err != nil {
			if last == nil {
				return nil, nil, nil, err
			}
			rep.Notes = append(rep.Notes, "scan failed: "+err.Error())
		} else {
			// Every command line is masked before anything can show it
			// (netstat's scanner masks its own; a Scan given may not).
			for i := range s.Processes {
				s.Processes[i].Cmdline = redact.Line(s.Processes[i].Cmdline)
			}
			slept = o.dropReleased(ctx, s, rep)
			last, at = s, s.Time
			tracker.Add(ownSockets(s, q))
			rep.Samples++
			if rep.Start.IsZero() {
				rep.Start = s.Time
				deadline = s.Time.Add(o.Duration)
			}
			rep.End = s.Time
			if o.Duration > 0 {
				o.sampleClients(s, perPID, fdSeries)
			}
		}
		if o.Duration <= 0 || !at.Add(o.Interval).Before(deadline.Add(o.Interval/2)) {
			break
		}
		if err := o.Sleep(ctx, max(o.Interval-slept, 0)); err != nil {
			break
		}
	}
	return last, perPID, fdSeries, nil
}

// ownSockets returns s with only the sockets a process holds when q names
// processes: the others that KeepOthers kept are for CountPorts, and the
// tracker never saw a restricted scan's unattributed sockets before them.
// Unrestricted, s itself.
func ownSockets(s *netstat.Snapshot, q netstat.Query) *netstat.Snapshot {
	if len(q.PIDs) == 0 && q.Process == nil {
		return s
	}
	n := 0
	for i := range s.Sockets {
		if s.Sockets[i].PID != 0 {
			n++
		}
	}
	v := *s
	v.Sockets = make([]netstat.Socket, 0, n)
	for i := range s.Sockets {
		if s.Sockets[i].PID != 0 {
			v.Sockets = append(v.Sockets, s.Sockets[i])
		}
	}
	return &v
}

// dropReleased checks the held CLOSE sockets of s again HeldRecheck after
// the scan and leaves out those their process closed meanwhile (a close in
// progress: Java NIO releases a closed channel's fd at its selector's next
// select), each process's count said in a note. It returns the time it
// waited, which the wait for the next scan is shortened by.
func (o *Options) dropReleased(ctx context.Context, s *netstat.Snapshot, rep *Report) time.Duration {
	if len(s.HeldClose()) == 0 {
		return 0
	}
	if o.Sleep(ctx, o.HeldRecheck) != nil {
		return o.HeldRecheck
	}
	gone := s.DropReleased(o.Holds)
	for _, pid := range slices.Sorted(maps.Keys(gone)) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("pid %d: %s in state CLOSE closed by the process within %s of the scan: a close in progress, not held",
			pid, human.Plural(gone[pid], "socket"), o.HeldRecheck))
	}
	return o.HeldRecheck
}

// sampleClients records, for each process of s that is a Kafka client, its
// instance count (from its threads) and its open fds at this scan.
func (o *Options) sampleClients(s *netstat.Snapshot, perPID map[int][]int, fdSeries map[int]*analyzer.FDEvidence) {
	for _, p := range s.Processes {
		c := o.Identify(p)
		if ts, err := o.Threads(p.PID); err == nil {
			perPID[p.PID] = append(perPID[p.PID], countPrefix(ts, c))
		}
		if p.Kafka == "" && !c.Identified() {
			continue
		}
		if cs, err := o.FDs(p.PID); err == nil {
			e := fdSeries[p.PID]
			if e == nil {
				e = &analyzer.FDEvidence{}
				fdSeries[p.PID] = e
			}
			e.Times, e.Open = append(e.Times, s.Time), append(e.Open, cs.Open)
		}
	}
}

// blindness marks the report blind when CLOSE_WAIT sockets could not be
// attributed for a reason that could hide a Kafka client's (a process kdiag
// could not read, its own fd limit): what doctor did not see could change
// what it says.
func blindness(rep *Report, last *netstat.Snapshot) {
	if u := last.Unseen; u != nil && u.Sockets[netstat.CloseWait.String()] > 0 {
		rep.Blind = true
		rep.BlindReason = fmt.Sprintf("%s unattributed: %s", human.Plural(u.Sockets[netstat.CloseWait.String()], "CLOSE_WAIT socket"), u.Reason)
	}
}

// selectPIDs returns the processes to report: every one named, else every
// Kafka client: marked by the scan (its class path, librdkafka, sockets to
// brokers), or identified as one and holding CLOSE_WAIT or held CLOSE
// sockets (a Go client whose every socket keepalive has reset holds only
// held CLOSE, which has no remote address to mark it by). A named pid that
// is not there makes the report blind, said once.
func (o *Options) selectPIDs(rep *Report, last *netstat.Snapshot, series map[int]*analyzer.ProcessSeries, q netstat.Query, isB func(netip.AddrPort) bool) []int {
	named := len(q.PIDs) > 0 || q.Process != nil
	toBrokers := map[int]bool{}
	if len(o.Query.Brokers) > 0 {
		for _, s := range last.Sockets {
			if s.State != netstat.Listen && isB(s.Remote) {
				toBrokers[s.PID] = true
			}
		}
	}
	var pids []int
	for _, p := range last.Processes {
		ps := series[p.PID]
		leaks := ps != nil && ps.Last.Leaked() > 0
		// kdiag's own broker and tools are not Kafka clients, only when
		// named.
		if ps != nil && ps.Client.NotAClient() && !named {
			continue
		}
		if named || p.Kafka != "" || toBrokers[p.PID] || leaks && ps.Client.Identified() {
			pids = append(pids, p.PID)
		}
	}
	var missing []int
	for _, pid := range q.PIDs {
		if slices.Contains(pids, pid) {
			continue
		}
		_, err := o.ReadProc(pid)
		switch {
		case slices.Contains(last.Missing, pid) || errors.Is(err, fs.ErrNotExist):
			missing = append(missing, pid)
		case err != nil:
			rep.Blind = true
			rep.BlindReason = cmp.Or(rep.BlindReason, fmt.Sprintf("--pid %d names no process kdiag can read: %v", pid, err))
		default:
			pids = append(pids, pid)
		}
	}
	if len(missing) > 0 {
		// Said once, in the words scan and watch use.
		rep.Blind = true
		rep.BlindReason = cmp.Or(rep.BlindReason, (&netstat.NoProcessError{PIDs: missing}).Error())
	}
	return pids
}

// sampleThreads reads the threads of every process ThreadSamples times,
// ThreadEvery apart.
func (o *Options) sampleThreads(ctx context.Context, pids []int) map[int][][]clients.ThreadSample {
	samples := map[int][][]clients.ThreadSample{}
	for i := range o.ThreadSamples {
		if i > 0 {
			if err := o.Sleep(ctx, o.ThreadEvery); err != nil {
				break
			}
		}
		for _, pid := range pids {
			if ts, err := o.Threads(pid); err == nil {
				samples[pid] = append(samples[pid], ts)
			}
		}
	}
	return samples
}

func (o *Options) process(a *analyzer.Analysis, ps *analyzer.ProcessSeries, samples [][]clients.ThreadSample, scanCounts []int,
	fdSeries *analyzer.FDEvidence, last *netstat.Snapshot, aopts analyzer.Options) Process {
	pid := ps.Key.PID
	c := ps.Client
	p := Process{PID: pid, Name: ps.Name(), Cmdline: redact.Line(ps.Process.Cmdline), User: ps.Process.User,
		Container: ps.Process.Container, Client: c, Sockets: map[string]int{}, BrokerSockets: map[string]int{},
		ThreadSamples: len(samples), Verdict: analyzer.CloseWaitShape(ps, aopts)}
	th := clients.Classify(c.Catalog(), samples, o.Arch)
	if len(scanCounts) > 0 && th.Instances >= 0 {
		th.InstanceCounts = append(scanCounts, th.InstanceCounts...)
	}
	if th.Instances >= 0 {
		n := th.Instances
		p.Instances = &n
	}
	p.NetworkThreads = th.Network
	if p.NetworkThreads == nil {
		p.NetworkThreads = []clients.NetworkThread{}
	}
	p.countSockets(last, netstat.IsBroker(o.Query.Brokers))
	if _, age, ok := ps.Oldest(a); ok && age.Known() {
		p.OldestCloseWait = &age
	}
	ev := analyzer.Evidence{Client: c, HeldClosed: p.Sockets[netstat.Close.String()]}
	if len(samples) > 0 {
		ev.Threads = &th
	}
	ev.Config, ev.IdleConfigured = o.lintConfig(&p, ps, c)
	ev.FDs = o.fdEvidence(&p, fdSeries, aopts)
	if sc, err := o.Sysctls(p.PID); err == nil {
		ev.Sysctls = &sc
		if last != nil {
			ev.Ports = analyzer.CountPorts(last.Sockets, pid, aopts.IsBroker, ev.Sysctls)
		}
	}
	for _, f := range analyzer.Diagnose(a, ps, ev, aopts) {
		df := Finding{ID: f.Kind, Severity: f.Severity, Title: f.Summary, Evidence: f.Details, KeyEvidence: f.Evidence, Causes: f.Causes}
		if len(f.Causes) > 0 {
			df.Fix, df.Rules, df.Ends = f.Causes[0].Fix, f.Causes[0].Rules, f.Causes[0].Ends
		}
		p.Findings = append(p.Findings, df)
	}
	if !c.Identified() && !c.NotAClient() {
		p.Findings = append(p.Findings, Finding{ID: KindNotIdentified, Severity: analyzer.Info,
			Title:       "Kafka client not identified: the diagnosis is the general one, not the library's",
			Evidence:    c.Evidence,
			KeyEvidence: []string{strings.Join(c.Evidence, "; ")},
			Fix:         "Run kdiag doctor as root (it reads /proc/PID/exe, maps and fds); docs/clients.md lists what kdiag recognizes and how."})
	}
	if p.Findings == nil {
		p.Findings = []Finding{}
	}
	p.NoFinding = noFinding(p, a, aopts)
	return p
}

// fdEvidence takes the process's fd census now, joins it to the series
// taken over --duration, and sets the report's FDs; nil when its fds
// cannot be read.
func (o *Options) fdEvidence(p *Process, series *analyzer.FDEvidence, aopts analyzer.Options) *analyzer.FDEvidence {
	cs, err := o.FDs(p.PID)
	if err != nil {
		return nil
	}
	e := &analyzer.FDEvidence{Last: cs}
	if series != nil {
		e.Times, e.Open = series.Times, series.Open
	}
	p.FDs = &FDReport{Census: cs}
	if tr, eta, ok := e.Growth(aopts); ok {
		p.FDs.PerMinute, p.FDs.UntilLimit = tr.PerMinute, eta
	}
	return e
}

// countSockets counts the process's sockets at the last scan by state, and
// those to brokers. netstat lists held CLOSE sockets (doctor's query asks
// for every state, CLOSE included).
func (p *Process) countSockets(last *netstat.Snapshot, isB func(netip.AddrPort) bool) {
	for _, s := range last.Sockets {
		if s.PID != p.PID {
			continue
		}
		p.Sockets[s.State.String()]++
		if s.State != netstat.Listen && isB(s.Remote) {
			p.BrokerSockets[s.State.String()]++
		}
	}
}

// lintConfig lints the configuration found for the process against the
// broker's idle timeout (what its closes showed, unless --broker-idle-ms
// was given), with the catalog of the client's version, and returns the
// findings as the diagnosis cites them, and the client's idle setting as
// the configuration sets it ("" when it does not).
func (o *Options) lintConfig(p *Process, ps *analyzer.ProcessSeries, c clients.Client) ([]analyzer.ConfigFact, string) {
	lintOpts := rules.DefaultOptions()
	lintOpts.BrokerIdleMS = o.BrokerIdleMS
	if med, _, _, _, ok := analyzer.BrokerIdle(ps); ok && !o.BrokerIdleGiven {
		// What the broker did, read off the CLOSE_WAIT sockets, beats
		// its default.
		p.BrokerIdleMS = med.Milliseconds()
		lintOpts.BrokerIdleMS = p.BrokerIdleMS
	}
	if c.Library == clients.KafkaClients {
		if v, err := rules.ParseVersion(majorMinor(c.Version)); err == nil {
			lintOpts.KafkaVersion = v.String()
		}
	}
	// KD102 says what the broker's idle close costs this client: CLOSE_WAIT
	// for one that does not read idle connections, reconnects otherwise.
	if lib := c.Catalog(); lib != nil {
		lintOpts.HoldsFIN = !lib.ReadsIdle
	}
	var facts []analyzer.ConfigFact
	idle := ""
	p.ConfigFiles = []ConfigFile{}
	for _, src := range o.Config(p.PID, c) {
		cf := ConfigFile{Path: src.Path, How: src.How, Dialect: src.Dialect, Error: src.Err, Findings: []LintFinding{}}
		if src.File != nil {
			if lib := c.Catalog(); lib != nil {
				if e, ok := effective(src.File, lib.IdleSetting); ok {
					idle = fmt.Sprintf("%s at %s", e.Value, src.Where(int(e.KeyPos.Line)))
				}
			}
			lintOpts.Env = src.Env
			for _, f := range rules.LintFile(src.File, lintOpts) {
				lf := LintFinding{Rule: f.RuleID, Severity: f.Severity.String(), Where: src.Where(int(f.Pos.Line)), Message: f.Message, Fix: f.Fix}
				cf.Findings = append(cf.Findings, lf)
				facts = append(facts, analyzer.ConfigFact{Rule: f.RuleID, Where: lf.Where, Message: f.Message})
			}
		}
		p.ConfigFiles = append(p.ConfigFiles, cf)
	}
	return facts, idle
}

// effective returns the entry that sets key in f as the client reads it:
// the highest rank, the last of those.
func effective(f *config.File, key string) (config.Entry, bool) {
	var best config.Entry
	found := false
	for _, e := range f.Entries {
		if e.Key == key && (!found || e.Rank >= best.Rank) {
			best, found = e, true
		}
	}
	return best, found
}

// noFinding says why a process that holds CLOSE_WAIT or held CLOSE sockets
// got no finding of warning or worse, and what would make one; "" when it
// holds none or got one.
func noFinding(p Process, a *analyzer.Analysis, aopts analyzer.Options) string {
	cw, held := p.Sockets[netstat.CloseWait.String()], p.Sockets[netstat.Close.String()]
	if cw+held == 0 || worst(p.Findings) >= int(analyzer.Warning) {
		return ""
	}
	what := human.Plural(cw, "CLOSE_WAIT socket")
	if held > 0 {
		what += fmt.Sprintf(" and %d held CLOSE", held)
	}
	age := "of unknown age"
	if p.OldestCloseWait != nil {
		age = "the oldest " + p.OldestCloseWait.Words()
	}
	why := "none is held past --stuck-age " + human.Age(aopts.StuckAge)
	if lib := p.Client.Catalog(); lib != nil && lib.ReadsIdle {
		why = lib.Name + " reads every connection and closes on the broker's FIN, so a young CLOSE_WAIT is one it has not closed yet; none is held past --stuck-age " + human.Age(aopts.StuckAge)
	}
	trend := "and one scan shows no trend"
	if a.Samples > 1 {
		trend = "and the count is " + p.Verdict + " over " + human.Plural(a.Samples, "scan")
	}
	more := fmt.Sprintf("a finding needs one held past --stuck-age, or a count that grows over --duration of %s or more (%d scans)",
		human.Age(analyzer.DefaultMinDuration), analyzer.DefaultMinSamples)
	return fmt.Sprintf("No finding for %s, %s: %s, %s; %s.", what, age, why, trend, more)
}

// countPrefix counts the threads that mark one instance of c's library.
func countPrefix(ts []clients.ThreadSample, c clients.Client) int {
	lib := c.Catalog()
	if lib == nil || lib.Threads == nil || lib.Threads.Instance == "" {
		return -1
	}
	n := 0
	for _, t := range ts {
		if strings.HasPrefix(t.Name, lib.Threads.Instance) {
			n++
		}
	}
	return n
}

// majorMinor cuts 3.9.0 (or 7.7.0-ccs) to 3.9.
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	if _, err := strconv.Atoi(parts[1]); err != nil {
		return v
	}
	return parts[0] + "." + parts[1]
}

func worst(fs []Finding) int {
	w := 0
	for _, f := range fs {
		w = max(w, int(f.Severity))
	}
	return w
}

// ExitCode is doctor's exit status: 3 when it could not see, else by the
// worst finding: 2 critical, 1 warning, 0 otherwise.
func (r *Report) ExitCode() int {
	if r.Blind {
		return 3
	}
	w := 0
	for _, p := range r.Processes {
		w = max(w, worst(p.Findings))
	}
	switch analyzer.Severity(w) {
	case analyzer.Critical:
		return 2
	case analyzer.Warning:
		return 1
	}
	return 0
}
