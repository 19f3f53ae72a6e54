package analyzer

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

// benchSnap is a synthetic snapshot of the benchmark size: cw CLOSE_WAIT
// and est ESTABLISHED sockets over procs processes, toward 3 brokers.
func benchSnap(i, cw, est, procs int) *netstat.Snapshot {
	s := &netstat.Snapshot{Time: t0.Add(time.Duration(i) * time.Second)}
	for p := range procs {
		s.Processes = append(s.Processes, netstat.Process{PID: 1000 + p, Name: "client", StartTime: t0})
	}
	brokers := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.2:9092"), netip.MustParseAddrPort("127.0.0.3:9092"), netip.MustParseAddrPort("127.0.0.4:9092")}
	for j := range cw + est {
		st := netstat.Established
		if j < cw {
			st = netstat.CloseWait
		}
		s.Sockets = append(s.Sockets, netstat.Socket{State: st, PID: 1000 + j%procs, Inode: uint64(j + 1), RecvQ: 1,
			Local:  netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(10000+j%50000)),
			Remote: brokers[j%3], Age: time.Duration(i) * time.Second, HasAge: true})
	}
	return s
}

// BenchmarkTrackerAdd is the analyzer's share of one watch sample at the
// issue's size (20,000 CLOSE_WAIT, 40,000 ESTABLISHED, 6 processes).
func BenchmarkTrackerAdd(b *testing.B) {
	tr := NewTracker(Options{Window: time.Hour})
	s := benchSnap(0, 20000, 40000, 6)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.Time = t0.Add(time.Duration(i) * time.Second)
		tr.Add(s)
	}
}

// BenchmarkAnalysis is the per-sample analysis watch computes for metrics,
// after an hour of 1 Hz samples.
func BenchmarkAnalysis(b *testing.B) {
	benchHourAnalysis(b, benchSnap(0, 200, 400, 6))
}

// BenchmarkAnalysisManyRemotes is the analysis watch computes when it
// ends, after an hour of 1 Hz samples of 6 client processes and 4 servers
// whose clients fill MaxRemotes (B/op: what it allocates).
func BenchmarkAnalysisManyRemotes(b *testing.B) {
	s := benchSnap(0, 200, 400, 6)
	for srv := range 4 {
		pid := 2000 + srv
		s.Processes = append(s.Processes, netstat.Process{PID: pid, Name: "server", StartTime: t0})
		for j := range 200 {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established, PID: pid, Inode: uint64(100000 + srv*1000 + j),
				Local:  netip.MustParseAddrPort("127.0.0.2:9092"),
				Remote: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), uint16(30000+srv*1000+j))})
		}
	}
	benchHourAnalysis(b, s)
}

// benchHourAnalysis times Analysis after an hour of s at 1 Hz.
func benchHourAnalysis(b *testing.B, s *netstat.Snapshot) { benchAnalysis(b, s, 3600) }

// benchAnalysis times Analysis after samples of s at 1 Hz.
func benchAnalysis(b *testing.B, s *netstat.Snapshot, samples int) {
	tr := NewTracker(Options{Window: time.Hour})
	for i := range samples {
		s.Time = t0.Add(time.Duration(i) * time.Second)
		tr.Add(s)
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.Analysis()
	}
}

// BenchmarkCurrent is what watch computes per sample for the live view and
// metrics, after an hour of 1 Hz samples with 20,000 CLOSE_WAIT held.
func BenchmarkCurrent(b *testing.B) {
	tr := NewTracker(Options{Window: time.Hour})
	s := benchSnap(0, 200, 400, 6)
	for i := range 3599 {
		s.Time = t0.Add(time.Duration(i) * time.Second)
		tr.Add(s)
	}
	big := benchSnap(3599, 20000, 40000, 6)
	tr.Add(big)
	b.ReportAllocs()
	for b.Loop() {
		tr.Current()
	}
}

// BenchmarkTrackerHour reports what an hour of 1 Hz samples leaves in the
// tracker's heap (B/hour): 6 processes, and a server process whose 2,000
// clients' endpoints fill MaxRemotes, with a few sockets changing state
// every sample.
func BenchmarkTrackerHour(b *testing.B) {
	var grown uint64
	for b.Loop() {
		tr := NewTracker(Options{Window: time.Hour})
		s := benchSnap(0, 200, 400, 6)
		for j := range 2000 {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established, PID: 2000, Inode: uint64(100000 + j),
				Local:  netip.MustParseAddrPort("127.0.0.2:9092"),
				Remote: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), uint16(30000+j))})
		}
		s.Processes = append(s.Processes, netstat.Process{PID: 2000, Name: "server", StartTime: t0})
		var before, after runtime.MemStats
		for i := range 3600 {
			s.Time = t0.Add(time.Duration(i) * time.Second)
			s.Sockets[i%600].State = netstat.CloseWait + netstat.State(i%2) // churn
			tr.Add(s)
			if i == 59 {
				runtime.GC()
				runtime.ReadMemStats(&before)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		grown = after.HeapInuse - before.HeapInuse
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(float64(grown), "B/hour")
}

// BenchmarkTrackerLive reports what the tracker keeps (B) of a sample of
// the size: 20,000 CLOSE_WAIT and 40,000 ESTABLISHED over 6
// processes, the snapshot itself not retained.
func BenchmarkTrackerLive(b *testing.B) {
	var kept uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr := NewTracker(Options{Window: time.Hour})
		for i := range 2 {
			tr.Add(benchSnap(i, 20000, 40000, 6))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept = after.HeapInuse - before.HeapInuse
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(float64(kept), "B")
}

// BenchmarkAnalysisCaseD is the analysis kdiag watch computes when it ends
// after 20 samples at case D (20,000 CLOSE_WAIT, 40,000 ESTABLISHED over 6
// processes): B/op is what it adds to watch's heap at its peak.
func BenchmarkAnalysisCaseD(b *testing.B) {
	benchAnalysis(b, benchSnap(0, 20000, 40000, 6), 20)
}
