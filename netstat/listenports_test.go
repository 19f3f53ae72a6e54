package netstat

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bcAudit is inet_diag_bc_audit (net/ipv4/inet_diag.c) for the ops
// sportFilter writes (the port comparisons, JMP and NOP): nil when the
// kernel accepts the program, else why it answers EINVAL.
func bcAudit(bc []byte) error {
	if len(bc) < 4 {
		return fmt.Errorf("shorter than one op")
	}
	// valid_cc: whether the op cc bytes before the end is on the chain of
	// yes offsets from the first op.
	validCC := func(cc int) bool {
		for pos, n := 0, len(bc); n >= 0; {
			if cc > n {
				return false
			}
			if cc == n {
				return true
			}
			yes := int(bc[pos+1])
			if yes < 4 || yes&3 != 0 {
				return false
			}
			n -= yes
			pos += yes
		}
		return false
	}
	pos, n := 0, len(bc)
	for n > 0 {
		code, yes, no := bc[pos], int(bc[pos+1]), int(binary.NativeEndian.Uint16(bc[pos+2:]))
		minLen := 4
		switch code {
		case bcSGE, bcSLE:
			minLen += 4 // the port, in a follow-on op
			if n < minLen {
				return fmt.Errorf("op at %d: port comparison without its port", pos)
			}
		case bcJmp, 0: // JMP, NOP
		default:
			return fmt.Errorf("op at %d: code %d is not one sportFilter writes", pos, code)
		}
		if code != 0 {
			if no < minLen || no > n+4 || no&3 != 0 {
				return fmt.Errorf("op at %d: no %d out of range (left %d)", pos, no, n)
			}
			if no < n && !validCC(n-no) {
				return fmt.Errorf("op at %d: no %d lands off the yes chain", pos, no)
			}
		}
		if yes < minLen || yes > n+4 || yes&3 != 0 {
			return fmt.Errorf("op at %d: yes %d out of range (left %d)", pos, yes, n)
		}
		pos += yes
		n -= yes
	}
	if n != 0 {
		return fmt.Errorf("the yes chain ends %d bytes past the end", -n)
	}
	return nil
}

// bcRun is inet_diag_bc_run for those ops: whether the kernel sends a
// socket of local port sport.
func bcRun(bc []byte, sport uint16) bool {
	pos, n := 0, len(bc)
	for n > 0 {
		code, yes, no := bc[pos], int(bc[pos+1]), int(binary.NativeEndian.Uint16(bc[pos+2:]))
		ok := true
		switch code {
		case bcJmp:
			ok = false
		case bcSGE:
			ok = sport >= binary.NativeEndian.Uint16(bc[pos+6:])
		case bcSLE:
			ok = sport <= binary.NativeEndian.Uint16(bc[pos+6:])
		}
		step := no
		if ok {
			step = yes
		}
		pos += step
		n -= step
	}
	return n == 0
}

func TestPortRanges(t *testing.T) {
	for _, tc := range []struct {
		ports []uint16
		want  [][2]uint16
	}{
		{nil, nil},
		{[]uint16{0}, nil},
		{[]uint16{9092}, [][2]uint16{{9092, 9092}}},
		{[]uint16{9094, 9092, 9093, 9092}, [][2]uint16{{9092, 9094}}},
		{[]uint16{9092, 9093, 9095, 1, 65535, 65534}, [][2]uint16{{1, 1}, {9092, 9093}, {9095, 9095}, {65534, 65535}}},
	} {
		if d := cmp.Diff(tc.want, portRanges(tc.ports)); d != "" {
			t.Errorf("portRanges(%v) (-want +got):\n%s", tc.ports, d)
		}
	}
}

// TestSportFilter checks the program sportFilter writes against the
// kernel's audit and interpreter (bcAudit, bcRun): accepted, and keeping
// exactly the sockets whose local port is one of the ports, for every port.
func TestSportFilter(t *testing.T) {
	many := make([]uint16, 0, maxFilterRanges)
	for i := range maxFilterRanges {
		many = append(many, uint16(1000+2*i))
	}
	for _, ports := range [][]uint16{
		{9092},
		{9092, 9093},
		{9092, 9094},
		{9092, 9093, 9094, 9095},
		{1, 9092, 65535},
		{65535},
		{1},
		{9093, 9092, 29092, 9092},
		many,
	} {
		bc := sportFilter(ports)
		if bc == nil {
			t.Errorf("sportFilter(%v) = nil", ports)
			continue
		}
		if err := bcAudit(bc); err != nil {
			t.Errorf("sportFilter(%v): the kernel's audit rejects it: %v\n% x", ports, err, bc)
			continue
		}
		var wrong []int
		for p := range 1 << 16 {
			if bcRun(bc, uint16(p)) != slices.Contains(ports, uint16(p)) {
				wrong = append(wrong, p)
			}
		}
		if len(wrong) > 0 {
			t.Errorf("sportFilter(%v) decides wrongly for %d ports, first %v", ports, len(wrong), wrong[:min(len(wrong), 5)])
		}
	}
	if bc := sportFilter(append(many, 60000)); bc != nil {
		t.Errorf("%d ranges: a program of %d bytes, want none (filtered in user space)", maxFilterRanges+1, len(bc))
	}
	if bc := sportFilter(nil); bc != nil {
		t.Errorf("no ports: a program of %d bytes, want none", len(bc))
	}
}

// TestEncodeInetDiagReqSports checks the request with a port filter: the
// struct as without, then one INET_DIAG_REQ_BYTECODE attribute holding
// sportFilter's program.
func TestEncodeInetDiagReqSports(t *testing.T) {
	ports := []uint16{9092, 9093}
	b := encodeInetDiagReq(IPv4, States(Established, FinWait2), false, ports)
	if d := cmp.Diff(encodeInetDiagReq(IPv4, States(Established, FinWait2), false, nil), b[:sizeofInetDiagReqV2]); d != "" {
		t.Errorf("inet_diag_req_v2 (-without ports +with):\n%s", d)
	}
	bc := sportFilter(ports)
	if d := cmp.Diff(rtattr(inetDiagReqBytecode, bc), b[sizeofInetDiagReqV2:]); d != "" {
		t.Errorf("the attribute (-want +got):\n%s", d)
	}
}

func TestQueryMatchListenPorts(t *testing.T) {
	q := Query{ListenPorts: []uint16{9092, 9093}}
	for _, tc := range []struct {
		s    Socket
		want bool
	}{
		{Socket{State: Established, Local: netip.MustParseAddrPort("10.0.0.1:9092"), Remote: netip.MustParseAddrPort("10.0.0.2:40000")}, true},
		{Socket{State: FinWait2, Local: netip.MustParseAddrPort("10.0.0.1:9093"), Remote: netip.MustParseAddrPort("10.0.0.2:40001")}, true},
		{Socket{State: Listen, Local: netip.MustParseAddrPort("0.0.0.0:9092"), Remote: netip.MustParseAddrPort("0.0.0.0:0")}, true},
		// The client's side of the same connection: its remote port is 9092.
		{Socket{State: Established, Local: netip.MustParseAddrPort("10.0.0.2:40000"), Remote: netip.MustParseAddrPort("10.0.0.1:9092")}, false},
		// A held CLOSE socket of unknown address.
		{Socket{State: Close}, false},
	} {
		if got := q.matchSocket(&tc.s); got != tc.want {
			t.Errorf("matchSocket(%s %s->%s) = %v, want %v", tc.s.State, tc.s.Local, tc.s.Remote, got, tc.want)
		}
	}
	// With a remote filter too, both apply.
	q.RemotePorts = []uint16{40000}
	if !q.matchSocket(&Socket{State: Established, Local: netip.MustParseAddrPort("10.0.0.1:9092"), Remote: netip.MustParseAddrPort("10.0.0.2:40000")}) ||
		q.matchSocket(&Socket{State: Established, Local: netip.MustParseAddrPort("10.0.0.1:9092"), Remote: netip.MustParseAddrPort("10.0.0.2:40001")}) {
		t.Errorf("ListenPorts with RemotePorts: both must match")
	}
}
