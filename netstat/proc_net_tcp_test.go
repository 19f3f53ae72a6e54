package netstat

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// -update rewrites golden files (DEVELOPERS.md: go test ./... -update). The
// flag is defined only if no other test file of the package has defined it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite testdata golden files")
	}
}

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// littleEndian: the fixtures were captured on x86-64, and /proc/net/tcp
// writes address words in host order, so they decode as captured only on a
// little-endian host.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

const procFixtures = "testdata/procnet"

// addrPortCmp lets go-cmp compare netip values, whose fields are unexported.
var addrPortCmp = cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })

func parseFixture(t *testing.T, path string, fam Family, states StateSet) ([]Socket, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseProcNetTCP(bytes.NewReader(b), fam, states)
}

func TestParseProcNetTCPGolden(t *testing.T) {
	if !littleEndian {
		t.Skip("fixtures hold little-endian address words")
	}
	for _, tc := range []struct {
		file string
		fam  Family
		n    int
	}{{"tcp", IPv4, 15}, {"tcp6", IPv6, 16}} {
		t.Run(tc.file, func(t *testing.T) {
			socks, err := parseFixture(t, filepath.Join(procFixtures, "net", tc.file), tc.fam, AllStates)
			if err != nil {
				t.Fatal(err)
			}
			if len(socks) != tc.n {
				t.Errorf("%d sockets, want %d (one per line)", len(socks), tc.n)
			}
			got, err := json.MarshalIndent(socks, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join(procFixtures, tc.file+".golden")
			if updatingGolden() {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if d := cmp.Diff(string(want), string(got)+"\n"); d != "" {
				t.Errorf("%s (-want +got):\n%s", golden, d)
			}
		})
	}
}

// TestParseProcNetTCPLines checks lines of the fixtures decoded by hand, so
// that a golden file regenerated from a wrong parser cannot pass.
func TestParseProcNetTCPLines(t *testing.T) {
	if !littleEndian {
		t.Skip("fixtures hold little-endian address words")
	}
	v4, err := parseFixture(t, filepath.Join(procFixtures, "net", "tcp"), IPv4, AllStates)
	if err != nil {
		t.Fatal(err)
	}
	v6, err := parseFixture(t, filepath.Join(procFixtures, "net", "tcp6"), IPv6, AllStates)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name string
		got  Socket
		want Socket
	}{
		{
			// "  12: 0100007F:C298 0100007F:9D37 08 00000000:00000004 ... 0 0 61528"
			name: "tcp line 12: CLOSE_WAIT with 3 bytes and the FIN unread",
			got:  v4[12],
			want: Socket{Family: IPv4, State: CloseWait, Local: ap("127.0.0.1:49816"), Remote: ap("127.0.0.1:40247"), RecvQ: 4, Inode: 61528, FD: -1},
		},
		{
			// "   0: 0100007F:8B8D 00000000:0000 0A ..."
			name: "tcp line 0: LISTEN",
			got:  v4[0],
			want: Socket{Family: IPv4, State: Listen, Local: ap("127.0.0.1:35725"), Remote: ap("0.0.0.0:0"), Inode: 61524, FD: -1},
		},
		{
			// "  13: 0100007F:A5CE 0100007F:8435 06 ... 0 0 0 3 ..." (short line)
			name: "tcp line 13: TIME_WAIT, no inode",
			got:  v4[13],
			want: Socket{Family: IPv4, State: TimeWait, Local: ap("127.0.0.1:42446"), Remote: ap("127.0.0.1:33845"), FD: -1},
		},
		{
			// "  15: 00000000000000000000000001000000:ACFC ...:B1E3 08 00000000:00000001"
			name: "tcp6 line 15: CLOSE_WAIT on ::1, FIN unread",
			got:  v6[15],
			want: Socket{Family: IPv6, State: CloseWait, Local: ap("[::1]:44284"), Remote: ap("[::1]:45539"), RecvQ: 1, Inode: 61540, FD: -1},
		},
		{
			// "   9: 0000000000000000FFFF00000100007F:C1F1 ..."
			name: "tcp6 line 9: IPv4-mapped peer of a dual-stack listener",
			got:  v6[9],
			want: Socket{Family: IPv6, State: Established, Local: ap("[::ffff:127.0.0.1]:49649"), Remote: ap("[::ffff:127.0.0.1]:42070"), Inode: 61550, FD: -1},
		},
		{
			name: "tcp6 line 1: dual-stack listener on [::]",
			got:  v6[1],
			want: Socket{Family: IPv6, State: Listen, Local: ap("[::]:49649"), Remote: ap("[::]:0"), Inode: 61548, FD: -1},
		},
	} {
		if d := cmp.Diff(tc.want, tc.got, addrPortCmp); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

func TestParseProcNetTCPStateFilter(t *testing.T) {
	for _, tc := range []struct {
		file   string
		fam    Family
		states StateSet
		want   map[State]int
	}{
		{"tcp", IPv4, States(CloseWait), map[State]int{CloseWait: 2}},
		{"tcp", IPv4, States(Established, Listen), map[State]int{Established: 5, Listen: 5}},
		{"tcp6", IPv6, States(CloseWait, TimeWait), map[State]int{CloseWait: 2, TimeWait: 1}},
		{"tcp6", IPv6, States(SynSent), map[State]int{}},
		{"tcp", IPv4, 0, map[State]int{}},
	} {
		socks, err := parseFixture(t, filepath.Join(procFixtures, "net", tc.file), tc.fam, tc.states)
		if err != nil {
			t.Fatal(err)
		}
		got := map[State]int{}
		for _, s := range socks {
			got[s.State]++
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s %b (-want +got):\n%s", tc.file, tc.states, d)
		}
	}
}

func TestParseProcNetTCPBroken(t *testing.T) {
	for _, tc := range []struct {
		file       string
		fam        Family
		wantInodes []uint64 // the good lines' sockets, in order
		wantLines  []int    // the line numbers the error quotes
		wantErr    bool
	}{
		{file: "tcp_truncated", fam: IPv4, wantInodes: []uint64{61524, 0}, wantLines: []int{3}, wantErr: true},
		{file: "tcp_badhex", fam: IPv4, wantInodes: []uint64{61524, 61528}, wantLines: []int{3, 4, 5, 6, 7}, wantErr: true},
		{file: "tcp_missing_fields", fam: IPv4, wantInodes: []uint64{0}, wantLines: []int{2, 3, 5}, wantErr: true},
		{file: "tcp6_wrong_family", fam: IPv6, wantInodes: []uint64{61543}, wantLines: []int{2}, wantErr: true},
		{file: "tcp_empty", fam: IPv4, wantErr: true},
		{file: "tcp_header_only", fam: IPv4},
	} {
		t.Run(tc.file, func(t *testing.T) {
			socks, err := parseFixture(t, filepath.Join(procFixtures, "broken", tc.file), tc.fam, AllStates)
			var inodes []uint64
			for _, s := range socks {
				inodes = append(inodes, s.Inode)
			}
			if d := cmp.Diff(tc.wantInodes, inodes); d != "" {
				t.Errorf("inodes of the good lines (-want +got):\n%s", d)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrParse) {
				t.Errorf("err = %v, want one wrapping ErrParse", err)
			}
			msg := err.Error()
			for _, n := range tc.wantLines {
				if !strings.Contains(msg, fmt.Sprintf("line %d: ", n)) {
					t.Errorf("error does not quote line %d: %v", n, err)
				}
			}
			if got := strings.Count(msg, "line "); got != len(tc.wantLines) && len(tc.wantLines) > 0 {
				t.Errorf("error quotes %d lines, want %d: %v", got, len(tc.wantLines), err)
			}
		})
	}
}

func TestParseProcNetTCPErrorIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("  sl  local_address rem_address   st\n")
	for range 1000 {
		b.WriteString("   0: nonsense\n")
	}
	_, err := parseProcNetTCP(strings.NewReader(b.String()), IPv4, AllStates)
	if !errors.Is(err, ErrParse) {
		t.Fatalf("err = %v, want ErrParse", err)
	}
	if n := strings.Count(err.Error(), "line "); n != maxReportedLines {
		t.Errorf("error quotes %d lines, want %d", n, maxReportedLines)
	}
	if !strings.Contains(err.Error(), "and 995 more") {
		t.Errorf("error does not count the rest: %v", err)
	}
}

func TestParseProcNetTCPLongLine(t *testing.T) {
	in := "  sl  local_address\n" + strings.Repeat("x", 100<<10) + "\n" +
		"   0: 0100007F:8B8D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 61524 1 0\n"
	socks, err := parseProcNetTCP(strings.NewReader(in), IPv4, AllStates)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "line 2: line longer than 64 KiB") {
		t.Errorf("err = %v, want ErrParse about line 2", err)
	}
	if len(socks) != 1 || socks[0].Inode != 61524 {
		t.Errorf("sockets %+v, want the line after the long one", socks)
	}
}

func TestReadProcNetTCP(t *testing.T) {
	socks, err := ReadProcNetTCP(procFixtures, 0, AllStates)
	if err != nil {
		t.Fatal(err)
	}
	fams := map[Family]int{}
	for _, s := range socks {
		fams[s.Family]++
	}
	if d := cmp.Diff(map[Family]int{IPv4: 15, IPv6: 16}, fams); d != "" {
		t.Errorf("sockets by family (-want +got):\n%s", d)
	}

	// 4242's namespace has no tcp6 (a kernel without IPv6): not an error.
	socks, err = ReadProcNetTCP(procFixtures, 4242, AllStates)
	if err != nil || len(socks) != 2 {
		t.Errorf("pid 4242: %d sockets, err %v; want 2, nil", len(socks), err)
	}

	// A process that is gone.
	if _, err := ReadProcNetTCP(procFixtures, 999999, AllStates); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("exited pid: err = %v, want fs.ErrNotExist", err)
	}

	// Malformed lines: the good sockets and an ErrParse naming the file.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(procFixtures, "broken", "tcp_badhex"), filepath.Join(root, "net", "tcp"))
	copyFile(t, filepath.Join(procFixtures, "net", "tcp6"), filepath.Join(root, "net", "tcp6"))
	socks, err = ReadProcNetTCP(root, 0, AllStates)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), filepath.Join(root, "net", "tcp")+": ") {
		t.Errorf("err = %v, want ErrParse naming the file", err)
	}
	if len(socks) != 2+16 {
		t.Errorf("%d sockets, want the 18 good ones", len(socks))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// procNetTCPHeader is the kernel's tcp header (tcp4_seq_show).
const procNetTCPHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

// formatProcAddr writes an address as /proc/net/tcp does, the inverse of
// parseProcAddr.
func formatProcAddr(ap netip.AddrPort) string {
	var b strings.Builder
	a := ap.Addr().AsSlice()
	for i := 0; i+4 <= len(a); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(a[i:]))
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}

// formatProcNetTCPLine writes s as get_tcp4_sock's format does.
func formatProcNetTCPLine(i int, s Socket) string {
	return fmt.Sprintf("%4d: %s %s %02X %08X:%08X 00:00000000 00000000 %5d %8d %d 1 0000000000000000 20 4 30 10 -1\n",
		i, formatProcAddr(s.Local), formatProcAddr(s.Remote), uint8(s.State), s.SendQ, s.RecvQ, s.UID, 0, s.Inode)
}

// syntheticProcNetTCP returns a tcp table of n sockets, one CLOSE_WAIT in
// every three, the rest ESTABLISHED.
func syntheticProcNetTCP(n int) []byte {
	var b bytes.Buffer
	b.WriteString(procNetTCPHeader)
	for i := range n {
		st := Established
		if i%3 == 0 {
			st = CloseWait
		}
		b.WriteString(formatProcNetTCPLine(i, Socket{
			State:  st,
			Local:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), uint16(30000+i%30000)),
			Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, 0, 1}), 9092),
			RecvQ:  uint32(i % 2), UID: 1000, Inode: uint64(100000 + i),
		}))
	}
	return b.Bytes()
}

func TestSyntheticProcNetTCPRoundTrip(t *testing.T) {
	in := syntheticProcNetTCP(300)
	socks, err := parseProcNetTCP(bytes.NewReader(in), IPv4, AllStates)
	if err != nil {
		t.Fatal(err)
	}
	if len(socks) != 300 {
		t.Fatalf("%d sockets, want 300", len(socks))
	}
	var out bytes.Buffer
	out.WriteString(procNetTCPHeader)
	for i, s := range socks {
		out.WriteString(formatProcNetTCPLine(i, s))
	}
	if d := cmp.Diff(string(in), out.String()); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func BenchmarkParseProcNetTCP(b *testing.B) {
	in := syntheticProcNetTCP(60000)
	for _, bc := range []struct {
		name   string
		states StateSet
	}{{"all", AllStates}, {"close-wait", States(CloseWait)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				socks, err := parseProcNetTCP(bytes.NewReader(in), IPv4, bc.states)
				if err != nil || len(socks) == 0 {
					b.Fatal(len(socks), err)
				}
			}
		})
	}
}

func FuzzParseProcNetTCP(f *testing.F) {
	for _, dir := range []string{"net", "broken"} {
		files, _ := filepath.Glob(filepath.Join(procFixtures, dir, "*"))
		for _, file := range files {
			if strings.HasSuffix(file, ".golden") {
				continue
			}
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, strings.HasSuffix(file, "6"), uint32(AllStates))
		}
	}
	f.Add(syntheticProcNetTCP(3), false, uint32(States(CloseWait)))
	f.Fuzz(func(t *testing.T, in []byte, v6 bool, states uint32) {
		fam := IPv4
		if v6 {
			fam = IPv6
		}
		socks, err := parseProcNetTCP(bytes.NewReader(in), fam, StateSet(states))
		if err != nil && !errors.Is(err, ErrParse) {
			t.Fatalf("error not wrapping ErrParse from an in-memory reader: %v", err)
		}
		for _, s := range socks {
			if !StateSet(states).Has(s.State) || s.Family != fam {
				t.Fatalf("socket %+v outside the query (states %b, family %v)", s, states, fam)
			}
			if s.Local.Addr().Is4() != (fam == IPv4) {
				t.Fatalf("socket %+v: address of the wrong family", s)
			}
		}
		// What the parser accepted, written back in the kernel's format,
		// parses to the same sockets.
		var out bytes.Buffer
		out.WriteString(procNetTCPHeader)
		for i, s := range socks {
			out.WriteString(formatProcNetTCPLine(i, s))
		}
		again, err := parseProcNetTCP(&out, fam, StateSet(states))
		if err != nil {
			t.Fatalf("re-parsing the formatted sockets: %v", err)
		}
		// Socket is comparable; go-cmp would take seconds on the thousands
		// of sockets a large input gives, stalling the fuzzer.
		if !slices.Equal(socks, again) {
			t.Fatalf("round trip: %d sockets, then %d:\n%+v\n%+v", len(socks), len(again), socks, again)
		}
	})
}

func TestDedupSockets(t *testing.T) {
	ap := netip.MustParseAddrPort
	ln1 := Socket{Family: IPv4, State: Listen, Local: ap("0.0.0.0:9092"), Remote: ap("0.0.0.0:0"), Inode: 1}
	ln2 := ln1 // SO_REUSEPORT: same address, another socket
	ln2.Inode = 2
	tw := Socket{Family: IPv4, State: TimeWait, Local: ap("127.0.0.1:1"), Remote: ap("127.0.0.1:2")}
	tw6 := tw
	tw6.Family = IPv6
	cw := Socket{Family: IPv4, State: CloseWait, Local: ap("127.0.0.1:3"), Remote: ap("127.0.0.1:2"), Inode: 3}
	cwLater := cw
	cwLater.RecvQ = 1
	got := dedupSockets([]Socket{ln1, tw, ln2, cw, tw, ln1, cwLater, tw6})
	if d := cmp.Diff([]Socket{ln1, tw, ln2, cw, tw6}, got, addrPortCmp); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestDedupSocketsAppendsInodes: the inode buffer keeps what it held and
// gets each call's inodes after it, sorted among themselves, duplicates
// and a lone socket's included (a scan with CLOSE lists every namespace's
// dumped inodes there for heldClosed).
func TestDedupSocketsAppendsInodes(t *testing.T) {
	ap := netip.MustParseAddrPort
	cw := func(ino uint64) Socket {
		return Socket{Family: IPv4, State: CloseWait, Local: ap("127.0.0.1:3"), Remote: ap("127.0.0.1:2"), Inode: ino}
	}
	tw := Socket{Family: IPv4, State: TimeWait, Local: ap("127.0.0.1:1"), Remote: ap("127.0.0.1:2")}
	buf := []uint64{90, 10}
	got := dedupSocketsWith([]Socket{cw(7), tw, cw(5), cw(7)}, &buf)
	if d := cmp.Diff([]Socket{cw(7), tw, cw(5)}, got, addrPortCmp); d != "" {
		t.Errorf("deduped (-want +got):\n%s", d)
	}
	got = dedupSocketsWith([]Socket{cw(3)}, &buf)
	if len(got) != 1 {
		t.Errorf("a lone socket: %d back", len(got))
	}
	if d := cmp.Diff([]uint64{90, 10, 5, 7, 7, 3}, buf); d != "" {
		t.Errorf("inodes (-want +got):\n%s", d)
	}
}
