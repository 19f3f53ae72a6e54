package analyzer

import (
	"net/netip"
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
	tr := NewTracker(Options{Window: time.Hour})
	s := benchSnap(0, 200, 400, 6)
	for i := range 3600 {
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
