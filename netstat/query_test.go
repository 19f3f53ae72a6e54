package netstat

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestParseEndpoint(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		in      string
		want    Endpoint
		wantErr bool
	}{
		{"127.0.0.1:9092", Endpoint{Host: "127.0.0.1", Addrs: []netip.Addr{a("127.0.0.1")}, Port: 9092}, false},
		{"127.0.0.1", Endpoint{Host: "127.0.0.1", Addrs: []netip.Addr{a("127.0.0.1")}}, false},
		{"[::1]:9093", Endpoint{Host: "::1", Addrs: []netip.Addr{a("::1")}, Port: 9093}, false},
		{"::1", Endpoint{Host: "::1", Addrs: []netip.Addr{a("::1")}}, false},
		{"localhost:9092", Endpoint{Host: "localhost", Addrs: nil, Port: 9092}, false}, // Addrs checked below
		{":9092", Endpoint{}, true},
		{"host:port", Endpoint{}, true},
		{"127.0.0.1:70000", Endpoint{}, true},
		{"", Endpoint{}, true},
		{"no-such-host.invalid:9092", Endpoint{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEndpoint(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.in == "localhost:9092" {
				if len(got.Addrs) == 0 || !got.Match(netip.MustParseAddrPort("127.0.0.1:9092")) {
					t.Errorf("localhost resolved to %v, want 127.0.0.1 among them", got.Addrs)
				}
				got.Addrs = nil
			}
			if d := cmp.Diff(tt.want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestParseBrokers(t *testing.T) {
	got, err := ParseBrokers("127.0.0.1:9092, SASL_SSL://127.0.0.2:9093,127.0.0.3")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range got {
		s = append(s, e.String())
	}
	if d := cmp.Diff([]string{"127.0.0.1:9092", "127.0.0.2:9093", "127.0.0.3:9092"}, s); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := ParseBrokers(" , "); err == nil {
		t.Error("an empty list gave no error")
	}
}

func TestEndpointMatch(t *testing.T) {
	e, err := ParseEndpoint("127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for ap, want := range map[string]bool{
		"127.0.0.1:9092":          true,
		"[::ffff:127.0.0.1]:9092": true,
		"127.0.0.1:9093":          false,
		"127.0.0.2:9092":          false,
	} {
		if got := e.Match(netip.MustParseAddrPort(ap)); got != want {
			t.Errorf("Match(%s) = %v, want %v", ap, got, want)
		}
	}
	anyPort, _ := ParseEndpoint("::1")
	if !anyPort.Match(netip.MustParseAddrPort("[::1]:1")) {
		t.Error("an endpoint without port does not match any port")
	}
}

func TestQueryMatchSocket(t *testing.T) {
	s := func(st State, remote string) Socket {
		return Socket{State: st, Remote: netip.MustParseAddrPort(remote)}
	}
	b, _ := ParseBrokers("127.0.0.1:9092")
	tests := []struct {
		name string
		q    Query
		s    Socket
		want bool
	}{
		{"all states", Query{}, s(CloseWait, "127.0.0.1:9092"), true},
		{"state out", Query{States: States(Established)}, s(CloseWait, "127.0.0.1:9092"), false},
		{"port in", Query{RemotePorts: []uint16{9092}}, s(CloseWait, "127.0.0.1:9092"), true},
		{"port out", Query{RemotePorts: []uint16{9093}}, s(CloseWait, "127.0.0.1:9092"), false},
		{"broker in", Query{Brokers: b}, s(Established, "127.0.0.1:9092"), true},
		{"broker out", Query{Brokers: b}, s(Established, "127.0.0.1:9093"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.q.matchSocket(&tt.s); got != tt.want {
				t.Errorf("matchSocket = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQueryRemotePortSet(t *testing.T) {
	ep := func(port uint16) Endpoint { return Endpoint{Host: "kafka", Port: port} }
	for _, tc := range []struct {
		name string
		q    Query
		want []uint16
	}{
		{"no filter", Query{}, nil},
		{"--port", Query{RemotePorts: []uint16{9093, 9092, 9093}}, []uint16{9092, 9093}},
		{"--port bounds --brokers", Query{RemotePorts: []uint16{9092}, Brokers: []Endpoint{ep(9092), ep(9094)}}, []uint16{9092}},
		{"--brokers", Query{Brokers: []Endpoint{ep(9094), ep(9092)}}, []uint16{9092, 9094}},
		{"--brokers with a portless host, --remote bounds", Query{Brokers: []Endpoint{ep(0)}, Remotes: []Endpoint{ep(19092)}}, []uint16{19092}},
		{"--remote without port", Query{Remotes: []Endpoint{ep(9092), ep(0)}}, nil},
	} {
		if got := tc.q.RemotePortSet(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: RemotePortSet() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSocketKeptByProcess: the mark fits the Socket's padding (128 bytes
// a socket: 7.7 MB at 60,000) and goes through JSON, present only when set.
func TestSocketKeptByProcess(t *testing.T) {
	if n := unsafe.Sizeof(Socket{}); n != 128 {
		t.Errorf("Socket is %d bytes, want 128", n)
	}
	x := Socket{Family: IPv4, State: Close, Inode: 7, PID: 3, FD: 4, KeptByProcess: true}
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"kept_by_process":true`) {
		t.Errorf("JSON %s lacks kept_by_process", b)
	}
	var y Socket
	if err := json.Unmarshal(b, &y); err != nil || !y.KeptByProcess {
		t.Errorf("read back %+v (%v), want KeptByProcess", y, err)
	}
	x.KeptByProcess = false
	if b, _ := json.Marshal(x); strings.Contains(string(b), "kept_by_process") {
		t.Errorf("JSON %s has kept_by_process though it is false", b)
	}
}
