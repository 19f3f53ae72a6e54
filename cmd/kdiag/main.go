// Command kdiag finds, explains and reproduces CLOSE_WAIT buildup between
// Kafka producers and brokers. See README.md.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/kdiag/kdiag/internal/cmd/root"
	"github.com/kdiag/kdiag/internal/cmdutil"
	// Before any package opens a file: exit 3 when ulimit -n leaves the
	// runtime too few descriptors, where it would die with exit 2.
	_ "github.com/kdiag/kdiag/internal/fdcheck"
	"github.com/shirou/gopsutil/v4/process"
)

func main() {
	os.Exit(run())
}

func run() int {
	// Nothing reads a heap profile of kdiag unless `kdiag scan --memprofile`
	// asks for one (and sets its own rate). Sampling would otherwise fill
	// the runtime's profile buckets, a few dozen pages of a 1.4 MB table.
	runtime.MemProfileRate = 0
	// One run reads one proc root, so the host's boot time cannot change
	// under it: without the cache gopsutil re-reads it for every process
	// whose start time kdiag asks for. It is a process-wide switch, so it
	// is set here and not by the library packages (whose tests point at
	// fixture trees with boot times of their own).
	process.EnableBootTimeCache(true)
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	f := cmdutil.NewFactory(cmdutil.System(), exe)
	cmd := root.NewCmdRootFor(f, os.Args[1:])
	if err := cmd.Execute(); err != nil {
		if strings.HasPrefix(err.Error(), "unknown command") {
			// cobra's own usage error, not a flag error: exit 2 like the others.
			err = cmdutil.UsageErrorf("%v (see 'kdiag --help')", err)
		}
		if msg := err.Error(); msg != "" && !isSilent(err) {
			fmt.Fprintln(f.IO.ErrOut, "kdiag:", msg)
		}
		return cmdutil.ExitCode(err)
	}
	return 0
}

// isSilent reports an ExitError without a message: the command already
// printed what it had to.
func isSilent(err error) bool {
	ee, ok := err.(*cmdutil.ExitError)
	return ok && ee.Err == nil
}
