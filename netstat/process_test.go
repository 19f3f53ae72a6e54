package netstat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testContainerID = "3f4e5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081"

func TestParseContainerID(t *testing.T) {
	tests := []struct {
		file    string
		want    string
		wantErr bool
	}{
		{"host-v2.txt", "", false},
		{"docker-v1.txt", testContainerID, false},
		{"docker-systemd.txt", testContainerID, false},
		{"containerd-systemd.txt", testContainerID, false},
		{"kubepods-cgroupfs.txt", testContainerID, false},
		{"crio.txt", testContainerID, false},
		{"crio-conmon.txt", "", false},
		{"empty.txt", "", false},
		{"broken.txt", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := readContainerID(filepath.Join("testdata", "cgroup", tt.file))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, errCgroup) {
				t.Errorf("err = %v, want it to wrap errCgroup", err)
			}
			if got != tt.want {
				t.Errorf("container = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzParseContainerID(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "cgroup", "*.txt"))
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseContainerID(bytes.NewReader(b))
		if err == nil && id != "" && !isContainerID(id) {
			t.Errorf("parseContainerID returned %q, not a container ID", id)
		}
	})
}

func TestReadProcessSelf(t *testing.T) {
	p, err := ReadProcess(context.Background(), "/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if p.PID != os.Getpid() || p.Name == "" || !strings.Contains(p.Cmdline, filepath.Base(exe)) {
		t.Errorf("ReadProcess(self) = %+v, want our pid, a name and a cmdline with %s", p, filepath.Base(exe))
	}
	if p.UID != uint32(os.Getuid()) || p.User == "" {
		t.Errorf("uid %d user %q, want uid %d and a user", p.UID, p.User, os.Getuid())
	}
	if p.StartTime.IsZero() || p.NetNS == 0 {
		t.Errorf("start time %v netns %d, want both set", p.StartTime, p.NetNS)
	}
}

func TestReadProcessExited(t *testing.T) {
	_, err := ReadProcess(context.Background(), t.TempDir(), 12345)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

// TestReadProcessMasksSecrets runs a real process with secrets on its command
// line: what kdiag reads of it (and so every output) shows none of them.
func TestReadProcessMasksSecrets(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30; exit 0", "sh", "--sasl.password=Hunter2", "-Djavax.net.ssl.keyStorePassword=Ks3cret", "--password", "Pw9")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sh: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait (bounded) until the kernel shows the new image's arguments.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if bytes.Contains(b, []byte("sleep 30")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/proc/%d/cmdline is %q after 10s, want sh's arguments", cmd.Process.Pid, b)
		}
	}
	p, err := ReadProcess(context.Background(), "/proc", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"Hunter2", "Ks3cret", "Pw9"} {
		if strings.Contains(p.Cmdline, secret) {
			t.Errorf("cmdline %q shows the secret %q", p.Cmdline, secret)
		}
	}
	if !strings.Contains(p.Cmdline, "--sasl.password=******") || !strings.Contains(p.Cmdline, "sleep 30; exit 0") {
		t.Errorf("cmdline %q, want the arguments kept with the secret masked", p.Cmdline)
	}
}
