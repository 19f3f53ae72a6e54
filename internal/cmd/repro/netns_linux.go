package repro

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/kdiag/kdiag/internal/cmdutil"
	"golang.org/x/sys/unix"
)

// netnsSupported says why --netns cannot run here, "" when it can: it
// needs root, for a network namespace of its own (CLONE_NEWNET) and its
// sysctl.
func netnsSupported() string {
	if os.Geteuid() != 0 {
		return "--netns needs root: a private network namespace (CLONE_NEWNET) and its net.ipv4.tcp_fin_timeout are root's to make; run it as root, or without --netns (held CLOSE then shows only after the host's tcp_fin_timeout, 60s by default, and the client's keepalive)"
	}
	return ""
}

// runInNetNS runs this kdiag again, with the same arguments, in a new
// network namespace (its only interface a loopback that it brings up), and
// gives its exit status as its own: the cluster, CMD and the sampling all
// live there.
func runInNetNS(ctx context.Context, opts *ReproOptions) error {
	exe := opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("repro: --netns: finding kdiag's own binary: %w", err)}
		}
	}
	cmd := exec.CommandContext(ctx, exe, opts.Args...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.Stdout, cmd.Stderr = opts.IO.Out, opts.IO.ErrOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	// Ctrl-C: the inner kdiag stops its command and reports, as the outer
	// one would.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = StopGraceNetNS
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return cmdutil.Exit(ee.ExitCode()) // it said why
	case err != nil:
		return &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("repro: --netns: %w", err)}
	}
	return nil
}

// StopGraceNetNS is how long the kdiag in the namespace has to stop its
// command and report after an interrupt.
const StopGraceNetNS = 15 * time.Second

// setupNetNS makes the namespace this process was started in usable: its
// loopback up (SIOCSIFFLAGS IFF_UP, netdevice(7)), and its
// net.ipv4.tcp_fin_timeout set to fin (a per-namespace sysctl, written
// through /proc/sys/net, which is the namespace of the writer).
func setupNetNS(fin time.Duration) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("a socket to bring lo up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	secs := strconv.Itoa(int(fin / time.Second))
	if err := os.WriteFile("/proc/sys/net/ipv4/tcp_fin_timeout", []byte(secs), 0o644); err != nil {
		return fmt.Errorf("setting net.ipv4.tcp_fin_timeout to %s: %w", secs, err)
	}
	return nil
}
