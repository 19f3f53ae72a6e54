package netstat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseSysctlInt(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		wantErr string
	}{
		{in: "60\n", want: 60},
		{in: "7200", want: 7200},
		{in: " 9 \n", want: 9},
		{in: "0\n", want: 0},
		{in: "", wantErr: `"" is not`},
		{in: "4096\t87380\t6291456\n", wantErr: `"4096\t87380\t6291456" is not`},
		{in: "-1\n", wantErr: `"-1" is not`},
		{in: "sixty\n", wantErr: `"sixty" is not`},
	} {
		got, err := parseSysctlInt([]byte(tc.in))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("parseSysctlInt(%q): %v", tc.in, err)
		case tc.wantErr != "" && (!errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseSysctlInt(%q) error %v, want ErrParse with %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && got != tc.want:
			t.Errorf("parseSysctlInt(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func FuzzParseSysctlInt(f *testing.F) {
	for _, s := range []string{"60\n", "", "1 2 3\n", "-5", "99999999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseSysctlInt(b)
		if err == nil && v < 0 {
			t.Errorf("parseSysctlInt(%q) = %d with no error", b, v)
		}
		if err != nil && !errors.Is(err, ErrParse) {
			t.Errorf("parseSysctlInt(%q): %v does not wrap ErrParse", b, err)
		}
	})
}

// TestNetSysctlsFixture: a proc tree's sys/net/ipv4 files, good and broken.
func TestNetSysctlsFixture(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys", "net", "ipv4")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tcp_fin_timeout", "2\n")
	write("tcp_keepalive_time", "30\n")
	write("tcp_keepalive_intvl", "5\n")
	write("tcp_keepalive_probes", "3\n")
	write("ip_local_port_range", "32768\t60999\n")
	got, err := NetSysctls(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := TCPSysctls{FinTimeout: 2 * time.Second, KeepaliveTime: 30 * time.Second, KeepaliveIntvl: 5 * time.Second, KeepaliveProbes: 3,
		PortLow: 32768, PortHigh: 60999}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got.Ports() != 28232 {
		t.Errorf("Ports() = %d, want 28232", got.Ports())
	}
	for _, bad := range []string{"60999 32768\n", "32768\n", "1024 70000\n", "a b\n"} {
		write("ip_local_port_range", bad)
		if _, err := NetSysctls(root, 0); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "ip_local_port_range") {
			t.Errorf("ip_local_port_range %q: error %v, want ErrParse naming the file", bad, err)
		}
	}
	write("ip_local_port_range", "32768\t60999\n")
	write("tcp_keepalive_probes", "many\n")
	_, err = NetSysctls(root, 0)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "tcp_keepalive_probes") || !strings.Contains(err.Error(), `"many"`) {
		t.Errorf("broken tcp_keepalive_probes: error %v, want ErrParse naming the file and quoting the value", err)
	}
	os.Remove(filepath.Join(dir, "tcp_fin_timeout"))
	if _, err := NetSysctls(root, 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing tcp_fin_timeout: error %v, want one wrapping fs.ErrNotExist", err)
	}
}
