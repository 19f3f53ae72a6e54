// Package metrics exposes what `kdiag watch` sees as Prometheus metrics, in
// the Prometheus text exposition format (version 0.0.4): served over HTTP
// (--listen, with kdiag's own go_ and process_ metrics, see process.go) or
// written for node_exporter's textfile collector (--textfile).
//
// Metrics (every gauge is the state at the last scan):
//
//	kdiag_tcp_sockets{pid,process,state,remote}           sockets; state as the kernel names it (CLOSE_WAIT)
//	kdiag_close_wait_oldest_age_seconds{pid,process}      age of the process's oldest CLOSE_WAIT socket: exact, or narrowed by the broker's idle timeout, else the least it can be
//	kdiag_close_wait_oldest_age_max_seconds{pid,process}  the most that age can be (absent when nothing bounds it)
//	kdiag_close_wait_growth_per_minute{pid,process}       CLOSE_WAIT growth rate, least-squares over the analyzer's recent window
//	kdiag_close_wait_growing{pid,process}                 1 when the analyzer's verdict is growing (a leak)
//	kdiag_finding{kind,severity,library,version}         client processes with a finding of the diagnosis, by kind and client version
//	kdiag_client_info{library,version,known_bugs}         client processes by library and version, with the known bugs of that version
//	kdiag_broker_client_connections{client,state}         on a broker host (watch --listen-ports): its side of its clients' connections by client address
//	kdiag_broker_client_connections_opened_per_minute{client}  on a broker host: new connections per client address over the last minute
//	kdiag_broker_client_addresses                         on a broker host: client addresses, those summed under client="other" included
//	kdiag_unseen_sockets{state}                           sockets kdiag could not attribute because it could not read their possible holders
//	kdiag_scan_duration_seconds                           how long the last scan took
//	kdiag_scans_total, kdiag_scan_errors_total            scans done and scans that failed
//	kdiag_scans_served_total                              scans that served the last dump again (watch --events)
//	kdiag_last_scan_timestamp_seconds                     when the last scan succeeded
//
// pid is "0" and process "" for sockets no process could be found for.
//
// Why no client library: client_golang links google.golang.org/protobuf
// and 46 other packages whose init runs in every kdiag command, not only in
// watch; that was 2.4 MB of the resident memory of every kdiag start and
// 2.4 MB of binary (BENCHMARKS.md, scan). VictoriaMetrics/metrics, the
// lightweight one, reads cgroup files in its package init (every kdiag
// start), and its process metrics have no help text and names promtool
// check metrics rejects. kdiag's series are rebuilt from every scan, which
// neither library's fixed gauges model, so the exposition is written here
// (about 60 lines, escaping included); the tests read it back with
// Prometheus's own parser and check it with promtool.
package metrics

import (
	"bytes"
	"cmp"
	"fmt"
	"github.com/kdiag/kdiag/internal/atomicfile"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
)

// DefaultMaxRemotes bounds the remote label values per (pid, state): the
// busiest endpoints keep their own series, the rest are summed under
// remote="other", so a server with thousands of clients cannot blow up the
// series count.
const DefaultMaxRemotes = 20

// Family is one metric family kdiag writes: its name, Prometheus type
// ("gauge" or "counter") and help text.
type Family struct {
	Name, Type, Help string
}

var (
	famSockets = Family{"kdiag_tcp_sockets", "gauge",
		"TCP sockets by holding process, state (as the kernel names it) and remote endpoint, at the last scan."}
	famOldest = Family{"kdiag_close_wait_oldest_age_seconds", "gauge",
		"Age of the process's oldest CLOSE_WAIT socket: tcp_info's time since the FIN when exact or narrowed by the broker's idle timeout, else the least it can be (keepalive ACKs reset tcp_info's time, or since kdiag first saw it); kdiag_close_wait_oldest_age_max_seconds is the most."}
	famOldestMax = Family{"kdiag_close_wait_oldest_age_max_seconds", "gauge",
		"The most the age of the process's oldest CLOSE_WAIT socket can be: since the last data it received (less the broker's idle timeout, when known)."}
	famGrowth = Family{"kdiag_close_wait_growth_per_minute", "gauge",
		"CLOSE_WAIT growth in sockets per minute, least-squares over the analyzer's recent window."}
	famGrowing = Family{"kdiag_close_wait_growing", "gauge",
		"1 when the analyzer's verdict for the process's CLOSE_WAIT count is growing (a leak), else 0."}
	famUnseen = Family{"kdiag_unseen_sockets", "gauge",
		"Sockets of the last scan that kdiag could not attribute because it could not read the processes that may hold them (permission, its own file-descriptor limit): a leak among them shows in no other kdiag_ series."}
	famScanDur = Family{"kdiag_scan_duration_seconds", "gauge", "Duration of the last scan."}
	famScans   = Family{"kdiag_scans_total", "counter", "Scans done, failed ones included."}
	famErrors  = Family{"kdiag_scan_errors_total", "counter", "Scans that failed."}
	famServed  = Family{"kdiag_scans_served_total", "counter",
		"Scans that served the last dump again, ages advanced, because the kernel reported no state change of a watched socket (kdiag watch --events); the rest of kdiag_scans_total dumped."}
	famLast = Family{"kdiag_last_scan_timestamp_seconds", "gauge", "Unix time of the last successful scan."}
)

// Families returns every family a Collector writes, in the order it writes
// them.
func Families() []Family {
	return []Family{famSockets, famOldest, famOldestMax, famGrowth, famGrowing, famFinding, famClientInfo, famBrokerConns, famBrokerOpened, famBrokerAddrs,
		famUnseen, famScanDur, famScans, famErrors, famServed, famLast}
}

// Collector holds the metrics of the last scan and analysis. Update and
// ScanFailed are called by the watch loop, WritePrometheus by scrapes; they
// may run concurrently.
type Collector struct {
	// MaxRemotes bounds remote label values per (pid, state); 0 means
	// DefaultMaxRemotes.
	MaxRemotes int
	// MaxClients bounds the client label values of a broker host's
	// families; 0 means DefaultMaxClients.
	MaxClients int
	// Analyzer are the thresholds of the diagnosis behind kdiag_finding
	// (watch's --stuck-age, its brokers).
	Analyzer analyzer.Options

	mu      sync.Mutex
	sockets []socketSeries
	// pending is the last scan's snapshot, not yet aggregated into sockets:
	// WritePrometheus does it, so that a 1 Hz watch scraped every 15 s aggregates
	// once per scrape rather than once per scan (at 60,000 sockets the
	// aggregation was 7% of watch's CPU, scraped or not). A Snapshot is
	// not changed after Scan returns it.
	pending *netstat.Snapshot
	// dump is the netstat.Snapshot.Dump that sockets was aggregated from:
	// a pending snapshot that serves the same dump again (Unchanged) has
	// the same sockets, and is not aggregated again.
	dump  uint64
	procs []procSeries
	// analysis is the last scan's analysis, not yet diagnosed into
	// findings and clients: as the sockets, at the next scrape (settle).
	analysis *analyzer.Analysis
	findings []findingSeries
	clients  []clientSeries
	// broker is the broker host's view (UpdateClients), nil without one.
	broker *brokerView
	// unseen is the last scan's netstat.Snapshot.Unseen sockets by state.
	unseen  map[string]int
	scanDur float64
	scans   uint64
	errors  uint64
	served  uint64
	last    time.Time
}

type socketSeries struct {
	pid, process, state, remote string
	n                           int
}

type procSeries struct {
	pid, process    string
	oldest, growth  float64
	oldestMax       float64
	hasMax          bool
	hasOld, hasRate bool
	growing         bool
}

// New returns a collector with no scan yet.
func New() *Collector { return &Collector{} }

// Update records a successful scan: the snapshot for kdiag_tcp_sockets and
// the analysis (of the series up to and including it) for ages and growth.
func (c *Collector) Update(s *netstat.Snapshot, a *analyzer.Analysis, scanDur time.Duration) {
	var procs []procSeries
	if a != nil {
		for _, p := range a.Processes {
			// Only processes holding sockets now: a pid that went away
			// (or was reused) must not keep a stale series.
			if !p.LastSeen.Equal(a.End) {
				continue
			}
			ps := procSeries{pid: strconv.Itoa(p.Key.PID), process: p.Process.Name}
			if _, age, ok := p.Oldest(a); ok && age.Known() {
				ps.oldest, ps.hasOld = age.Likely().Seconds(), true
				ps.oldestMax, ps.hasMax = age.Max.Seconds(), age.HasMax
			}
			if tr := p.CloseWaitRecent; tr.Samples >= 3 {
				ps.growth, ps.hasRate = tr.PerMinute, true
			}
			ps.growing = p.CloseWait.Verdict == analyzer.Growing || p.CloseWaitRecent.Verdict == analyzer.Growing
			procs = append(procs, ps)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.procs, c.analysis = s, procs, a
	c.unseen = nil
	if s.Unseen != nil {
		c.unseen = s.Unseen.Sockets
	}
	c.scanDur = scanDur.Seconds()
	c.scans++
	if s.Unchanged {
		c.served++
	}
	c.last = s.Time
}

// Release aggregates s now if it is the scan the collector holds still
// unaggregated, and lets go of it: its caller may then reuse its sockets'
// memory (netstat.Scanner.Recycle), which a pending snapshot would keep
// from the next scan (kdiag watch --listen: 7.7 MB a scan at 60,000
// sockets, allocated anew every scan). A scrape between two scans has
// aggregated it already, and costs nothing more.
func (c *Collector) Release(s *netstat.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == s {
		c.settle()
	}
}

// settle aggregates the pending snapshot into the series, unless it
// serves the dump they were aggregated from (Unchanged). c.mu is held.
func (c *Collector) settle() {
	if p := c.pending; p != nil {
		if !p.Unchanged || p.Dump == 0 || p.Dump != c.dump {
			c.sockets = aggregate(p, cmp.Or(c.MaxRemotes, DefaultMaxRemotes))
		}
		c.dump, c.pending = p.Dump, nil
	}
	if a := c.analysis; a != nil {
		c.findings, c.clients = diagnose(a, c.Analyzer)
		c.analysis = nil
	}
}

// ScanFailed records a scan that returned an error; the last good values stay.
func (c *Collector) ScanFailed(scanDur time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scans++
	c.errors++
	c.scanDur = scanDur.Seconds()
}

// aggregate counts sockets by (pid, state, remote), keeping the max busiest
// remotes of each (pid, state) and summing the rest under "other". Only the
// series kept are formatted: a server's ESTABLISHED sockets have a remote
// each (20,000 at case D), and formatting and sorting them all as strings
// cost a 1 Hz watch --listen 50 ms a scan.
func aggregate(s *netstat.Snapshot, max int) []socketSeries {
	// The key holds the remote packed: hashing a netip.AddrPort hashes
	// its zone's pointer too, and a key without pointers is cheaper to
	// hash and to keep (a third of the time).
	type key struct {
		remote netstat.PackedAddrPort
		pid    int32
		state  netstat.State
	}
	counts := make(map[key]int32)
	for i := range s.Sockets {
		sk := &s.Sockets[i]
		counts[key{netstat.PackAddrPort(sk.Remote), int32(max0(sk.PID)), sk.State}]++
	}
	type count struct {
		pid    int
		state  netstat.State
		remote netip.AddrPort // formatted once per series kept
		n      int
	}
	all := make([]count, 0, len(counts))
	for k, n := range counts {
		all = append(all, count{pid: int(k.pid), state: k.state, remote: k.remote.AddrPort(), n: int(n)})
	}
	// Busiest first within each (pid, state), so the cut keeps the top ones.
	slices.SortFunc(all, func(x, y count) int {
		return cmp.Or(cmp.Compare(x.pid, y.pid), cmp.Compare(x.state, y.state), cmp.Compare(y.n, x.n), x.remote.Compare(y.remote))
	})
	names := make(map[int]string, len(s.Processes))
	for _, p := range s.Processes {
		names[p.PID] = p.Name
	}
	var out []socketSeries
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].pid == all[i].pid && all[j].state == all[i].state {
			j++
		}
		pid, state := strconv.Itoa(all[i].pid), all[i].state.String()
		for k, c := range all[i:j] {
			if k == max {
				other := socketSeries{pid: pid, process: names[c.pid], state: state, remote: "other"}
				for _, r := range all[i+max : j] {
					other.n += r.n
				}
				out = append(out, other)
				break
			}
			remote := "" // a held CLOSE socket never seen connected
			if c.remote.IsValid() {
				remote = c.remote.String()
			}
			out = append(out, socketSeries{pid: pid, process: names[c.pid], state: state, remote: remote, n: c.n})
		}
		i = j
	}
	// The exposition's order, as it was: by pid and state as text, then
	// busiest first.
	slices.SortFunc(out, func(x, y socketSeries) int {
		return cmp.Or(cmp.Compare(x.pid, y.pid), cmp.Compare(x.state, y.state), boolRank(x.remote == "other", y.remote == "other"),
			cmp.Compare(y.n, x.n), cmp.Compare(x.remote, y.remote))
	})
	return out
}

// boolRank orders false before true.
func boolRank(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func max0(pid int) int {
	if pid < 0 {
		return 0
	}
	return pid
}

// WritePrometheus writes the kdiag_ families of the last scan to w in the
// Prometheus text format, each with its HELP and TYPE lines.
func (c *Collector) WritePrometheus(w io.Writer) {
	var b bytes.Buffer
	c.mu.Lock()
	c.settle()
	e := exposition{b: &b}
	for _, s := range c.sockets {
		e.sample(famSockets, float64(s.n), "pid", s.pid, "process", s.process, "remote", s.remote, "state", s.state) // labels sorted by name, as client_golang wrote them
	}
	for _, p := range c.procs {
		if p.hasOld {
			e.sample(famOldest, p.oldest, "pid", p.pid, "process", p.process)
		}
	}
	for _, p := range c.procs {
		if p.hasMax {
			e.sample(famOldestMax, p.oldestMax, "pid", p.pid, "process", p.process)
		}
	}
	for _, p := range c.procs {
		if p.hasRate {
			e.sample(famGrowth, p.growth, "pid", p.pid, "process", p.process)
		}
	}
	for _, p := range c.procs {
		g := 0.0
		if p.growing {
			g = 1
		}
		e.sample(famGrowing, g, "pid", p.pid, "process", p.process)
	}
	e.writeFleet(c.findings, c.clients)
	e.writeBrokerClients(c.broker)
	states := make([]string, 0, len(c.unseen))
	for st := range c.unseen {
		states = append(states, st)
	}
	slices.Sort(states)
	for _, st := range states {
		e.sample(famUnseen, float64(c.unseen[st]), "state", st)
	}
	e.sample(famScanDur, c.scanDur)
	e.sample(famScans, float64(c.scans))
	e.sample(famErrors, float64(c.errors))
	e.sample(famServed, float64(c.served))
	if !c.last.IsZero() {
		e.sample(famLast, float64(c.last.UnixNano())/1e9)
	}
	c.mu.Unlock()
	_, _ = w.Write(b.Bytes()) // outside the lock: a slow scraper must not stall Update
}

// exposition writes samples in the text format, each family's HELP and
// TYPE lines before its first sample: a family without samples is left out,
// as client_golang left it out.
type exposition struct {
	b    *bytes.Buffer
	last string // the family of the last sample
}

// sample writes one sample of f: name{label="value",...} v, with labels
// given as name, value pairs. A family's samples must come together.
func (e *exposition) sample(f Family, v float64, labels ...string) {
	b := e.b
	if f.Name != e.last {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.Name, helpEscaper.Replace(f.Help), f.Name, f.Type)
		e.last = f.Name
	}
	b.WriteString(f.Name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		// A process name is whatever the process set (comm, argv): the
		// format wants UTF-8, so invalid bytes become U+FFFD.
		labelEscaper.WriteString(b, strings.ToValidUTF8(labels[i+1], "\uFFFD"))
		b.WriteByte('"')
		if i+2 >= len(labels) {
			b.WriteByte('}')
		}
	}
	b.WriteByte(' ')
	b.Write(strconv.AppendFloat(b.AvailableBuffer(), v, 'g', -1, 64))
	b.WriteByte('\n')
}

// The text format's escapes: in label values a backslash, a double quote
// and a newline; in help text a backslash and a newline.
var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// ContentType is the media type of the text format WritePrometheus writes.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves c, then the Go runtime and process metrics of kdiag itself
// (go_*, process_*: VictoriaMetrics/metrics' WriteProcessMetrics), in the
// Prometheus text format.
func Handler(c *Collector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var b bytes.Buffer
		c.WritePrometheus(&b)
		writeProcess(&exposition{b: &b})
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		if r.Method == http.MethodGet {
			_, _ = w.Write(b.Bytes())
		}
	})
}

// TextfileName is the file WriteTextfile writes in its directory.
const TextfileName = "kdiag.prom"

// WriteTextfile writes c's metrics, without go_ and process_ ones
// (node_exporter exports its own, and a duplicate name would make it reject
// the file), to dir/kdiag.prom atomically: into a temporary file in dir
// (.kdiag.prom.<pid>.<n>.tmp, which node_exporter skips since it reads only
// *.prom), then renamed over the old one, so the collector never reads a
// half-written file.
func WriteTextfile(dir string, c *Collector) error {
	var b bytes.Buffer
	c.WritePrometheus(&b)
	// Exactly 0644, whatever the umask: node_exporter runs as a user of
	// its own (node_exporter, nobody) and must read the file, and it serves
	// what the file holds (counts, pids, process names, remote endpoints:
	// no command line) to whoever scrapes it, so others' read adds no
	// exposure; under a umask of 027 the file would be 0640 root:root,
	// unreadable to it, and kdiag's metrics would vanish with only an error
	// in node_exporter's log.
	return atomicfile.WriteMode(filepath.Join(dir, TextfileName), b.Bytes(), 0o644)
}

// CleanTextfileDir removes the temporary files a killed kdiag left in dir
// (see atomicfile.CleanStale) and returns a note saying what it removed, ""
// when nothing.
func CleanTextfileDir(dir string) (string, error) {
	removed, err := atomicfile.CleanStale(dir, TextfileName)
	return atomicfile.Describe(dir, removed), err
}
