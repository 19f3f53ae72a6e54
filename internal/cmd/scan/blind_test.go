//go:build linux

package scan

import (
	"errors"
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
