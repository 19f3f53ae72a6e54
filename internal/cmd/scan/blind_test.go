//go:build linux

package scan

import (
	"encoding/json"
	"time"

	"errors"
	"github.com/google/go-cmp/cmp"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/internal/testbin"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// kdiagBinary builds kdiag once, for the tests that run it as a user does:
// as another user, or with a low open-file limit.
func kdiagBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "kdiag-scan-test-"); binErr != nil {
			return
		}
		// Readable by the unprivileged user the tests run it as.
		if binErr = os.Chmod(binDir, 0o755); binErr != nil {
			return
		}
		binPath, binErr = testbin.BuildKdiag(binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// runKdiag runs the binary and returns its stdout, stderr and exit code.
func runKdiag(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	}
	t.Fatalf("%s: %v", cmd, err)
	return "", "", 0
}

// TestCheckUnprivilegedIsUnknown: an unprivileged check cannot read the fds
// of a root process holding 30 CLOSE_WAIT, so it cannot say OK: it says
// UNKNOWN (exit 3), and why, in its first line.
func TestCheckUnprivilegedIsUnknown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run kdiag as another user than the sockets' holder")
	}
	bin := kdiagBinary(t)
	child := sockettest.StartChild(t, sockettest.Spec{CloseWait: 30})
	for _, args := range [][]string{
		{"scan", "--state", "close-wait", "--warn", "5", "--crit", "10"},
		{"scan", "--state", "close-wait", "--pid", strconv.Itoa(child.PID), "--warn", "5", "--crit", "10"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, errOut, code := runKdiag(t, cmd)
			first, _, _ := strings.Cut(out, "\n")
			if code != 3 || !strings.HasPrefix(first, "KDIAG UNKNOWN - ") {
				t.Fatalf("exit %d, first line %q; want exit 3 and UNKNOWN\nstderr: %s", code, first, errOut)
			}
			n, _, _ := strings.Cut(strings.TrimPrefix(first, "KDIAG UNKNOWN - "), " CLOSE_WAIT unattributed")
			if c, err := strconv.Atoi(n); err != nil || c < 30 {
				t.Errorf("first line %q: want at least the child's 30 CLOSE_WAIT unattributed", first)
			}
			if !strings.Contains(first, "permission denied") || !strings.Contains(first, "CRITICAL") {
				t.Errorf("first line %q: want the cause (permission denied) and what it could be (CRITICAL)", first)
			}
		})
	}
}

// TestCheckWithFewFileDescriptors runs the check with an open-file limit of
// 8, below what its parallel fd walks take: it must still find the child's
// 30 CLOSE_WAIT (CRITICAL), not report an OK with them unattributed.
func TestCheckWithFewFileDescriptors(t *testing.T) {
	bin := kdiagBinary(t)
	child := sockettest.StartChild(t, sockettest.Spec{CloseWait: 30})
	cmd := exec.Command("sh", "-c", `ulimit -n 8 && exec "$0" "$@"`, bin,
		"scan", "--state", "close-wait", "--pid", strconv.Itoa(child.PID), "--warn", "5", "--crit", "10")
	out, errOut, code := runKdiag(t, cmd)
	first, _, _ := strings.Cut(out, "\n")
	want := "KDIAG CRITICAL - 30 CLOSE_WAIT in pid " + strconv.Itoa(child.PID)
	if code != 2 || !strings.HasPrefix(first, want) {
		t.Errorf("exit %d, first line %q; want exit 2 and %q\nstderr: %s", code, first, want, errOut)
	}
	if strings.Contains(errOut, "permission denied") && !strings.Contains(errOut, "process_api") {
		t.Errorf("stderr blames permissions for what the fd limit did:\n%s", errOut)
	}
}

// TestHeldClosedInEveryOutput runs kdiag on a child whose 5 CLOSE_WAIT
// sockets keepalive reset out of the kernel's tables: JSON lists exactly
// them in state CLOSE with the child's pid and fds, empty addresses; the
// table counts them in HELD-CLOSE; the check counts them.
func TestHeldClosedInEveryOutput(t *testing.T) {
	bin := kdiagBinary(t)
	c := sockettest.StartChild(t, sockettest.Spec{CloseWait: 5, KeepAlive: time.Second, FinTimeout: 2 * time.Second, NetNS: true})
	pid := strconv.Itoa(c.PID)
	var doc struct {
		Sockets []struct {
			State, Local, Remote string
			PID, FD              int
			Inode                uint64
		}
		Processes []struct {
			PID    int
			States map[string]int
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errOut, code := runKdiag(t, exec.Command(bin, "scan", "--state", "close-wait,close", "--pid", pid, "-o", "json"))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(doc.Processes) == 1 && doc.Processes[0].States["CLOSE"] == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := map[int]uint64{}
	for _, s := range c.CloseWait {
		want[s.FD] = s.Inode
	}
	got := map[int]uint64{}
	for _, s := range doc.Sockets {
		if s.State != "CLOSE" || s.PID != c.PID || s.Local != "" || s.Remote != "" {
			t.Errorf("socket %+v, want CLOSE of pid %d with empty addresses", s, c.PID)
		}
		got[s.FD] = s.Inode
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("held sockets by fd (-want +got):\n%s", d)
	}
	out, _, _ := runKdiag(t, exec.Command(bin, "scan", "--pid", pid))
	if !strings.Contains(out, "HELD-CLOSE") || !strings.Contains(strings.Fields(strings.Split(out, "\n")[1])[4], "5") {
		t.Errorf("table:\n%s\nwant a HELD-CLOSE column with 5", out)
	}
	out, _, code := runKdiag(t, exec.Command(bin, "scan", "--state", "close-wait,close", "--pid", pid, "--warn", "3"))
	if first, _, _ := strings.Cut(out, "\n"); code != 1 || !strings.Contains(first, "0 CLOSE_WAIT and 5 held CLOSE in pid "+pid) {
		t.Errorf("exit %d, check %q: want WARNING on 5 held CLOSE", code, first)
	}
}
