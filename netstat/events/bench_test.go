//go:build linux

package events

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BenchmarkStateChanges times the life of one loopback connection, with
// the tracepoint program detached, counting only (the program before
// transitions), and counting and recording transitions; unfiltered, and
// with a remote-port filter that lets the connection's changes through
// (port) or not (otherport). Each connection goes through about nine
// state changes, two of them recorded: the client connects, the server
// closes what it accepts (the client's ESTABLISHED -> CLOSE_WAIT), and
// the client closes with SO_LINGER 0 (CLOSE_WAIT -> CLOSE and an RST,
// which also leaves no TIME_WAIT behind on either side). The records are
// drained every 1000 connections, as a watch drains them on each scan.
//
// With BPF statistics on (kernel.bpf_stats_enabled, Linux 5.8, which the
// benchmark turns on for its run) it also reports the program's own time
// per run (ns/run: the kernel's run_time_ns / run_cnt for it, which does
// not depend on the rest of the connection's cost) and runs/op; and the
// machine's 1-minute load average when the benchmark ended (load1).
//
//	go test -run='^$' -bench=StateChanges -benchtime=20000x -count=5 ./netstat/events/
func BenchmarkStateChanges(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Logf("no BPF run-time statistics (%v): wall time only", err)
	} else {
		defer stats.Close()
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go serveClosing(ln, nil)
	srv := addrPort(ln.Addr())
	for _, bc := range []struct {
		name        string
		attach      bool
		transitions bool
		ports       []uint16
	}{
		{name: "detached"},
		{name: "count", attach: true},
		{name: "transitions", attach: true, transitions: true},
		{name: "count/port", attach: true, ports: []uint16{srv.Port()}},
		{name: "transitions/port", attach: true, transitions: true, ports: []uint16{srv.Port()}},
		{name: "transitions/otherport", attach: true, transitions: true, ports: []uint16{srv.Port() + 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var c *Counter
			if bc.attach {
				var err error
				if c, err = openCounter(bc.ports, 0, bc.transitions); err != nil {
					b.Skip(err)
				}
				defer c.Close()
				if bc.transitions && c.noTransitions != nil {
					b.Fatal(c.noTransitions)
				}
			}
			before := progStats(b, c)
			var n int
			b.ResetTimer()
			for i := range b.N {
				connectAndReset(b, srv)
				if c != nil && bc.transitions && i%1000 == 999 {
					tr, err := c.Transitions()
					if err != nil {
						b.Fatal(err)
					}
					n += len(tr)
				}
			}
			b.StopTimer()
			if c != nil && bc.transitions {
				tr, _ := c.Transitions()
				n += len(tr)
				dropped, _ := c.Dropped()
				b.ReportMetric(float64(n)/float64(b.N), "records/op")
				b.ReportMetric(float64(dropped), "dropped")
			}
			if after := progStats(b, c); after != nil && before != nil && after.RunCount > before.RunCount {
				runs := after.RunCount - before.RunCount
				b.ReportMetric(float64((after.Runtime-before.Runtime).Nanoseconds())/float64(runs), "ns/run")
				b.ReportMetric(float64(runs)/float64(b.N), "runs/op")
			}
			b.ReportMetric(load1(), "load1")
		})
	}
}

// connectAndReset makes one connection to srv, waits for the server's
// FIN (read returns EOF: CLOSE_WAIT), and resets it.
func connectAndReset(b *testing.B, srv interface{ String() string }) {
	c, err := net.Dial("tcp4", srv.String())
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var buf [1]byte
	if _, err := c.Read(buf[:]); !errors.Is(err, io.EOF) {
		b.Fatalf("read: %v, want EOF", err)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

func progStats(b *testing.B, c *Counter) *ebpf.ProgramStats {
	if c == nil {
		return nil
	}
	s, err := c.prog.Stats()
	if err != nil {
		b.Logf("program stats: %v", err)
		return nil
	}
	return s
}

// load1 is /proc/loadavg's first field, or -1.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}
