package netstat

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseTCP6InUse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		ok   bool
		name string
	}{
		{"TCP6: inuse 0\nUDP6: inuse 0\n", 0, true, "none"},
		{"TCP6: inuse 12\nUDP6: inuse 3\nRAW6: inuse 0\n", 12, true, "some"},
		{"UDP6: inuse 3\n", 0, false, "no TCP6 line"},
		{"TCP6: inuse x\n", 0, false, "not a number"},
		{"TCP6: inuse -1\n", -1, false, "negative"},
		{"", 0, false, "empty"},
	} {
		n, ok := parseTCP6InUse([]byte(tc.in))
		if n != tc.n || ok != tc.ok {
			t.Errorf("%s: parseTCP6InUse(%q) = %d, %v; want %d, %v", tc.name, tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

// hasIPv6TCP skips the IPv6 dump only on a 0 it read, and only for states
// sockstat6 counts.
func TestHasIPv6TCP(t *testing.T) {
	root := t.TempDir()
	write := func(pid, body string) {
		dir := filepath.Join(root, pid, "net")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sockstat6"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("self", "TCP6: inuse 0\n")
	write("42", "TCP6: inuse 2\n")
	cw := States(CloseWait, Established)
	for _, tc := range []struct {
		pid    int
		states StateSet
		want   bool
	}{
		{0, cw, false},                         // read 0
		{42, cw, true},                         // read 2
		{7, cw, true},                          // no file: dump
		{0, States(CloseWait, TimeWait), true}, // TIME_WAIT is not counted
		{0, States(FinWait2), true},            // nor a timewait FIN_WAIT2
	} {
		if got := hasIPv6TCP(root, tc.pid, tc.states); got != tc.want {
			t.Errorf("hasIPv6TCP(pid %d, %#x) = %v, want %v", tc.pid, tc.states, got, tc.want)
		}
	}
}

// tcpInUse adds IPv4's and IPv6's counts, and reads 0 for what is missing.
func TestTCPInUse(t *testing.T) {
	root := t.TempDir()
	write := func(pid, file, body string) {
		dir := filepath.Join(root, pid, "net")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("self", "sockstat", "sockets: used 230\nTCP: inuse 12 orphan 0 tw 3 alloc 15 mem 1\nUDP: inuse 2 mem 0\n")
	write("self", "sockstat6", "TCP6: inuse 5\nUDP6: inuse 0\n")
	write("42", "sockstat", "TCP: inuse x orphan 0\n")
	for _, tc := range []struct {
		pid, want int
	}{{0, 17}, {42, 0}, {7, 0}} {
		if got := tcpInUse(root, tc.pid); got != tc.want {
			t.Errorf("tcpInUse(pid %d) = %d, want %d", tc.pid, got, tc.want)
		}
	}
}
