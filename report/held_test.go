package report

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
)

// heldInput is three samples of one process holding 3 CLOSE_WAIT sockets
// and 3 held CLOSE ones (reset by keepalive, fds still open).
func heldInput() Input {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var snaps []netstat.Snapshot
	for i := range 3 {
		s := netstat.Snapshot{Time: start.Add(time.Duration(i) * time.Second), Source: "netlink",
			Processes: []netstat.Process{{PID: 40, Name: "app", StartTime: start.Add(-time.Hour)}}}
		for j := range 6 {
			st := netstat.CloseWait
			if j >= 3 {
				st = netstat.Close
			}
			s.Sockets = append(s.Sockets, netstat.Socket{State: st, PID: 40, FD: 10 + j, Inode: uint64(100 + j),
				Local:  netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), uint16(40000+j)),
				Remote: netip.MustParseAddrPort("10.0.0.1:9092")})
		}
		snaps = append(snaps, s)
	}
	return Input{Origin: "recording held.jsonl", Analysis: analyzer.Analyze(snaps, analyzer.Options{})}
}

// TestHeldCloseLabelled: a last sample of 3 CLOSE_WAIT and 3 held CLOSE
// sockets is said as such in every format, not "CLOSE_WAIT at the last
// sample: 6"; the trend columns, which count both, say so, and the chart
// draws the held ones as a line of their own.
func TestHeldCloseLabelled(t *testing.T) {
	in := heldInput()
	var md, html bytes.Buffer
	if err := Markdown(&md, in); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&html, in); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		format, out string
		want        []string
	}{
		{"markdown", md.String(), []string{
			"| CLOSE_WAIT at the last sample | 3 |\n| held CLOSE at the last sample | 3 |\n",
			"| CLOSE_WAIT + held CLOSE first → last (max) | held CLOSE |",
			"| 40 | app | 6 → 6 (6) | 3 | ",
		}},
		{"html", html.String(), []string{
			`<tr><th>CLOSE_WAIT at the last sample</th><td class="num">3</td></tr>` + "\n" +
				`<tr><th>held CLOSE at the last sample</th><td class="num">3</td></tr>`,
			`<th>CLOSE_WAIT + held CLOSE first → last (max)</th><th>held CLOSE</th>`,
			`<td class="num">6 → 6 (6)</td><td class="num">3</td>`,
			`<polyline class="held" data-series="held CLOSE"`,
		}},
	} {
		for _, w := range tc.want {
			if !strings.Contains(tc.out, w) {
				t.Errorf("%s lacks %q:\n%s", tc.format, w, tc.out)
			}
		}
	}
	// Without a finding to show (a verdict needs a longer window) the
	// line still counts them apart.
	if got, want := noFindingLine(in.Analysis), "3 CLOSE_WAIT + 3 held CLOSE sockets at the last sample"; !strings.HasPrefix(got, want) {
		t.Errorf("noFindingLine = %q, want it to start %q", got, want)
	}
}
