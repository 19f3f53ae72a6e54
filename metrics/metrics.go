// Package metrics exposes what `kdiag watch` sees as Prometheus metrics,
// through client_golang: served over HTTP (--listen) or written for
// node_exporter's textfile collector (--textfile).
//
// Metrics (every gauge is the state at the last scan):
//
//	kdiag_tcp_sockets{pid,process,state,remote}           sockets; state as the kernel names it (CLOSE_WAIT)
//	kdiag_close_wait_oldest_age_seconds{pid,process}      age of the process's oldest CLOSE_WAIT socket
//	kdiag_close_wait_growth_per_minute{pid,process}       CLOSE_WAIT growth rate, least-squares over the analyzer's recent window
//	kdiag_close_wait_growing{pid,process}                 1 when the analyzer's verdict is growing (a leak)
//	kdiag_scan_duration_seconds                           how long the last scan took
//	kdiag_scans_total, kdiag_scan_errors_total            scans done and scans that failed
//	kdiag_scans_served_total                              scans that served the last dump again (watch --events)
//	kdiag_last_scan_timestamp_seconds                     when the last scan succeeded
//
// pid is "0" and process "" for sockets no process could be found for.
package metrics

import (
	"cmp"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMaxRemotes bounds the remote label values per (pid, state): the
// busiest endpoints keep their own series, the rest are summed under
// remote="other", so a server with thousands of clients cannot blow up the
// series count.
const DefaultMaxRemotes = 20

var (
	descSockets = prometheus.NewDesc("kdiag_tcp_sockets",
		"TCP sockets by holding process, state (as the kernel names it) and remote endpoint, at the last scan.",
		[]string{"pid", "process", "state", "remote"}, nil)
	descOldest = prometheus.NewDesc("kdiag_close_wait_oldest_age_seconds",
		"Age of the process's oldest CLOSE_WAIT socket: tcp_info's time since the FIN, or since kdiag first saw it.",
		[]string{"pid", "process"}, nil)
	descGrowth = prometheus.NewDesc("kdiag_close_wait_growth_per_minute",
		"CLOSE_WAIT growth in sockets per minute, least-squares over the analyzer's recent window.",
		[]string{"pid", "process"}, nil)
	descGrowing = prometheus.NewDesc("kdiag_close_wait_growing",
		"1 when the analyzer's verdict for the process's CLOSE_WAIT count is growing (a leak), else 0.",
		[]string{"pid", "process"}, nil)
	descScanDur = prometheus.NewDesc("kdiag_scan_duration_seconds",
		"Duration of the last scan.", nil, nil)
	descScans = prometheus.NewDesc("kdiag_scans_total",
		"Scans done, failed ones included.", nil, nil)
	descErrors = prometheus.NewDesc("kdiag_scan_errors_total",
		"Scans that failed.", nil, nil)
	descServed = prometheus.NewDesc("kdiag_scans_served_total",
		"Scans that served the last dump again, ages advanced, because the kernel reported no state change of a watched socket (kdiag watch --events); the rest of kdiag_scans_total dumped.", nil, nil)
	descLast = prometheus.NewDesc("kdiag_last_scan_timestamp_seconds",
		"Unix time of the last successful scan.", nil, nil)
)

// Collector is a prometheus.Collector over the last scan and analysis. Update
// and ScanFailed are called by the watch loop, Collect by scrapes; they may
// run concurrently.
type Collector struct {
	// MaxRemotes bounds remote label values per (pid, state); 0 means
	// DefaultMaxRemotes.
	MaxRemotes int

	mu      sync.Mutex
	sockets []socketSeries
	// pending is the last scan's snapshot, not yet aggregated into sockets:
	// Collect does it, so that a 1 Hz watch scraped every 15 s aggregates
	// once per scrape rather than once per scan (at 60,000 sockets the
	// aggregation was 7% of watch's CPU, scraped or not). A Snapshot is
	// not changed after Scan returns it.
	pending *netstat.Snapshot
	// dump is the netstat.Snapshot.Dump that sockets was aggregated from:
	// a pending snapshot that serves the same dump again (Unchanged) has
	// the same sockets, and is not aggregated again.
	dump    uint64
	procs   []procSeries
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
			if o, ok := p.OldestCloseWait(); ok {
				ps.oldest, ps.hasOld = o.AgeAt(a.End).Seconds(), true
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
	c.pending, c.procs = s, procs
	c.scanDur = scanDur.Seconds()
	c.scans++
	if s.Unchanged {
		c.served++
	}
	c.last = s.Time
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
// remotes of each (pid, state) and summing the rest under "other".
func aggregate(s *netstat.Snapshot, max int) []socketSeries {
	type key struct {
		pid    int
		state  netstat.State
		remote netip.AddrPort // formatted once per series, not per socket
	}
	names := make(map[int]string, len(s.Processes))
	for _, p := range s.Processes {
		names[p.PID] = p.Name
	}
	counts := make(map[key]int)
	for i := range s.Sockets {
		sk := &s.Sockets[i]
		pid := max0(sk.PID)
		counts[key{pid, sk.State, sk.Remote}]++
	}
	all := make([]socketSeries, 0, len(counts))
	for k, n := range counts {
		all = append(all, socketSeries{pid: strconv.Itoa(k.pid), process: names[k.pid], state: k.state.String(), remote: k.remote.String(), n: n})
	}
	// Busiest first within each (pid, state), so the cut keeps the top ones.
	slices.SortFunc(all, func(x, y socketSeries) int {
		return cmp.Or(cmp.Compare(x.pid, y.pid), cmp.Compare(x.state, y.state), cmp.Compare(y.n, x.n), cmp.Compare(x.remote, y.remote))
	})
	out := all[:0:0]
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].pid == all[i].pid && all[j].state == all[i].state {
			j++
		}
		group := all[i:j]
		if len(group) > max {
			other := group[max]
			other.remote = "other"
			for _, g := range group[max+1:] {
				other.n += g.n
			}
			group = append(group[:max:max], other)
		}
		out = append(out, group...)
		i = j
	}
	return out
}

func max0(pid int) int {
	if pid < 0 {
		return 0
	}
	return pid
}

// Describe sends the descriptors of every metric the collector may emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSockets, descOldest, descGrowth, descGrowing, descScanDur, descScans, descErrors, descServed, descLast} {
		ch <- d
	}
}

// Collect sends the values of the last scan.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pending; p != nil {
		if !p.Unchanged || p.Dump == 0 || p.Dump != c.dump {
			c.sockets = aggregate(p, cmp.Or(c.MaxRemotes, DefaultMaxRemotes))
		}
		c.dump, c.pending = p.Dump, nil
	}
	for _, s := range c.sockets {
		ch <- prometheus.MustNewConstMetric(descSockets, prometheus.GaugeValue, float64(s.n), s.pid, s.process, s.state, s.remote)
	}
	for _, p := range c.procs {
		if p.hasOld {
			ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, p.oldest, p.pid, p.process)
		}
		if p.hasRate {
			ch <- prometheus.MustNewConstMetric(descGrowth, prometheus.GaugeValue, p.growth, p.pid, p.process)
		}
		g := 0.0
		if p.growing {
			g = 1
		}
		ch <- prometheus.MustNewConstMetric(descGrowing, prometheus.GaugeValue, g, p.pid, p.process)
	}
	ch <- prometheus.MustNewConstMetric(descScanDur, prometheus.GaugeValue, c.scanDur)
	ch <- prometheus.MustNewConstMetric(descScans, prometheus.CounterValue, float64(c.scans))
	ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(c.errors))
	ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(c.served))
	if !c.last.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, float64(c.last.UnixNano())/1e9)
	}
}

// Registry returns a registry holding only c: what the textfile holds
// (node_exporter already exports its own go_ and process_ metrics, and a
// duplicate name would make it reject the file).
func Registry(c *Collector) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return reg
}

// Handler serves c, plus the Go runtime and process metrics of kdiag itself,
// in the Prometheus exposition format.
func Handler(c *Collector) http.Handler {
	reg := Registry(c)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}

// TextfileName is the file WriteTextfile writes in its directory.
const TextfileName = "kdiag.prom"

// WriteTextfile writes c's metrics to dir/kdiag.prom atomically: into a
// temporary file in dir (named kdiag.prom<random>, which node_exporter skips
// since it reads only *.prom), then renamed over the old one, so the
// collector never reads a half-written file.
func WriteTextfile(dir string, c *Collector) error {
	return prometheus.WriteToTextfile(filepath.Join(dir, TextfileName), Registry(c))
}
