//go:build linux

package netstat

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/testio"
)

// sysctlChild starts `unshare -n` running a shell that sets the namespace's
// TCP sysctls to vals (tcp_fin_timeout, tcp_keepalive_time, _intvl,
// _probes), says so and waits, bounded, for its stdin to close. It skips
// the test without root or unshare.
func sysctlChild(t *testing.T, vals [4]int) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace of its own (unshare -n)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("needs unshare (util-linux): %v", err)
	}
	script := ""
	for i, name := range sysctlFiles {
		script += "echo " + strconv.Itoa(vals[i]) + " > /proc/sys/net/ipv4/" + name + " && "
	}
	script += "echo '" + childPorts + "' > /proc/sys/net/ipv4/" + portRangeFile + " && "
	// read returns at EOF, when the test closes stdin; timeout bounds it.
	script += "echo ready && exec timeout 60 sh -c \"read x\""
	h := testio.StartHeld(t, exec.Command("unshare", "-n", "sh", "-c", script))
	if line := h.Line(t, time.Minute); line != "ready" {
		t.Fatalf("the namespace's shell said %q, want ready", line)
	}
	return h.Cmd.Process.Pid
}

// childPorts is the ephemeral port range sysctlChild sets.
const childPorts = "20000 29999"

// hostSysctls reads kdiag's own namespace's values as a user would.
func hostSysctls(t *testing.T) [4]int {
	t.Helper()
	var out [4]int
	for i, name := range sysctlFiles {
		b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestNetSysctlsLive: the values of another namespace, set there as `sysctl
// -w` would, are read from it, not from kdiag's own (which /proc/<pid>/root/
// proc/sys would have given: checked by hand, see NetSysctls).
func TestNetSysctlsLive(t *testing.T) {
	host := hostSysctls(t)
	var vals [4]int
	for i, v := range host {
		vals[i] = v + 3 + i // differs from the host's in every field
	}
	pid := sysctlChild(t, vals)
	got, err := NetSysctls("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	ino, err := NetNSOf("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	want := TCPSysctls{NetNS: ino, FinTimeout: time.Duration(vals[0]) * time.Second, KeepaliveTime: time.Duration(vals[1]) * time.Second,
		KeepaliveIntvl: time.Duration(vals[2]) * time.Second, KeepaliveProbes: vals[3], PortLow: 20000, PortHigh: 29999}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the child's namespace (-want +got):\n%s", d)
	}
	self, err := NetSysctls("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	if self.FinTimeout != time.Duration(host[0])*time.Second || self.KeepaliveProbes != host[3] {
		t.Errorf("kdiag's own namespace: %+v, want the host's values %v", self, host)
	}
	// The cache: one read per namespace, each namespace its own.
	c := NewSysctlCache("/proc")
	for range 2 {
		got, err := c.NetSysctls(pid)
		if err != nil || got != want {
			t.Errorf("cache, child: %+v, %v; want %+v", got, err, want)
		}
		got, err = c.NetSysctls(0)
		if err != nil || got != self {
			t.Errorf("cache, kdiag's own: %+v, %v; want %+v", got, err, self)
		}
	}
	if n := len(c.byNS); n != 2 {
		t.Errorf("cache holds %d namespaces, want 2", n)
	}
}

// TestNetSysctlsErrors: a process that is gone says so (fs.ErrNotExist);
// without the privilege to enter, ErrNetNSUnavailable.
func TestNetSysctlsErrors(t *testing.T) {
	_, err := NetSysctls("/proc", 1<<30)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no such process: %v, want fs.ErrNotExist", err)
	}
}
