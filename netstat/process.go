package netstat

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kdiag/kdiag/internal/redact"
	"github.com/shirou/gopsutil/v4/common"
	"github.com/shirou/gopsutil/v4/process"
)

// ReadProcess reads what kdiag shows of process pid under procRoot: name,
// command line, user, uid and start time through gopsutil (pointed at
// procRoot through its context override, so procRoot stays a parameter and
// never the HOST_PROC environment variable), the container ID from
// /proc/<pid>/cgroup and the network namespace from /proc/<pid>/ns/net.
// States and Kafka are left for the caller, which knows the sockets.
//
// A process that has exited returns an error matching fs.ErrNotExist.
// Fields that cannot be read (another user's process when not root) stay
// empty; only a missing process is an error.
func ReadProcess(ctx context.Context, procRoot string, pid int) (Process, error) {
	p, _, err := readProcess(ctx, procRoot, pid)
	return p, err
}

// readProcess is ReadProcess that also returns the argument vector, which
// Kafka detection reads.
func readProcess(ctx context.Context, procRoot string, pid int) (Process, []string, error) {
	out := Process{PID: pid, States: map[string]int{}}
	if _, err := os.Stat(procRoot + "/" + strconv.Itoa(pid)); err != nil {
		return out, nil, fmt.Errorf("process %d: %w", pid, err)
	}
	ctx = context.WithValue(ctx, common.EnvKey, common.EnvMap{common.HostProcEnvKey: procRoot})
	// A Process value rather than NewProcessWithContext: the latter checks
	// the pid with kill(pid, 0) when procRoot is not a mount point (a
	// fixture tree), and reads /proc/<pid>/stat once more.
	gp := &process.Process{Pid: int32(pid)}
	out.Name, _ = gp.NameWithContext(ctx)
	args, _ := gp.CmdlineSliceWithContext(ctx)
	// Command lines carry secrets (--sasl.password=…); what kdiag shows of
	// them is masked here, at the one place every output gets them from.
	// Kafka detection reads the raw args.
	out.Cmdline = redact.Cmdline(args)
	if uids, err := gp.UidsWithContext(ctx); err == nil && len(uids) > 0 {
		out.UID = uids[0]
		if u, err := gp.UsernameWithContext(ctx); err == nil {
			out.User = u
		} else {
			out.User = strconv.FormatUint(uint64(uids[0]), 10)
		}
	}
	if ms, err := gp.CreateTimeWithContext(ctx); err == nil && ms > 0 {
		out.StartTime = time.UnixMilli(ms).UTC()
	}
	if id, err := readContainerID(procRoot + "/" + strconv.Itoa(pid) + "/cgroup"); err == nil {
		out.Container = id
	}
	if ns, err := NetNSOf(procRoot, pid); err == nil {
		out.NetNS = ns
	}
	if out.Name == "" && out.Cmdline == "" && processGone(procRoot, pid) {
		// Everything failed: the process exited meanwhile, or is a zombie
		// whose fds (and sockets) closed with it.
		return out, nil, fmt.Errorf("process %d: exited: %w", pid, fs.ErrNotExist)
	}
	return out, args, nil
}

// processGone reports whether pid has exited (no /proc/<pid>) or is a
// zombie (state Z or X in /proc/<pid>/stat, proc(5)): either way it holds no
// fds.
func processGone(procRoot string, pid int) bool {
	dir := procRoot + "/" + strconv.Itoa(pid)
	if _, err := os.Stat(dir); err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		// Gone between the two reads, or a fixture tree without stat files.
		_, derr := os.Stat(dir)
		return errors.Is(err, syscall.ESRCH) || errors.Is(derr, fs.ErrNotExist)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	return st == 'Z' || st == 'X'
}

// pfKthread is PF_KTHREAD, the flag of a kernel thread in the flags field of
// /proc/<pid>/stat (include/linux/sched.h).
const pfKthread = 0x00200000

// kernelThread reports whether pid is a kernel thread: it holds no fds, so
// that an unprivileged kdiag may not read them says nothing of any socket.
func kernelThread(procRoot string, pid int) bool {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	// After "(comm) ": state, ppid, pgrp, session, tty_nr, tpgid, flags.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread != 0
}

// readContainerID reads /proc/<pid>/cgroup.
func readContainerID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return parseContainerID(f)
}

// containerPrefixes are the runtime prefixes of a cgroup path segment that
// names a container: systemd scopes of docker ("docker-<id>.scope"),
// containerd's CRI plugin ("cri-containerd-<id>.scope"), cri-o
// ("crio-<id>.scope") and podman ("libpod-<id>.scope").
var containerPrefixes = []string{"docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"}

// parseContainerID returns the container ID found in a /proc/<pid>/cgroup
// file ("hierarchy-ID:controllers:path" lines, cgroups(7)), "" for a process
// on the host. It recognises the cgroupfs layouts (/docker/<id>,
// /kubepods/<qos>/pod<uid>/<id>) and the systemd ones
// (/system.slice/docker-<id>.scope, .../cri-containerd-<id>.scope,
// crio-<id>.scope, libpod-<id>.scope); an ID is 64 hex digits. cri-o's
// "crio-conmon-<id>" is the container's monitor, not the container.
func parseContainerID(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" {
			continue
		}
		parts := strings.SplitN(text, ":", 3)
		if len(parts) != 3 {
			return "", fmt.Errorf("cgroup line %d: %q: want hierarchy-ID:controllers:path: %w", line, text, errCgroup)
		}
		segs := strings.Split(parts[2], "/")
		for i := len(segs) - 1; i >= 0; i-- {
			seg := strings.TrimSuffix(segs[i], ".scope")
			if strings.HasPrefix(seg, "crio-conmon-") {
				continue
			}
			for _, p := range containerPrefixes {
				seg = strings.TrimPrefix(seg, p)
			}
			if isContainerID(seg) {
				return seg, nil
			}
		}
	}
	return "", sc.Err()
}

var errCgroup = errors.New("malformed cgroup file")

func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ShortContainerID returns the 12-character form docker and crictl print.
func ShortContainerID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// readProcNames returns the comm and the command line (NULs as spaces) of a
// process: the cheap reads the --process filter needs before any walk.
func readProcNames(procRoot string, pid int) (comm, cmdline string, err error) {
	dir := procRoot + "/" + strconv.Itoa(pid)
	c, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return "", "", err
	}
	cl, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return "", "", err
	}
	cl = bytes.TrimRight(cl, "\x00")
	return strings.TrimSpace(string(c)), string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})), nil
}
