package metrics

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/shirou/gopsutil/v4/common"
	"github.com/shirou/gopsutil/v4/process"
)

// kdiag's own go_ and process_ families, under the names and with the help
// texts of client_golang's Go and process collectors, so that dashboards
// made for any Go exporter read them. They are written here because
// VictoriaMetrics/metrics' WriteProcessMetrics, used before, gives no help
// text and names that Prometheus's conventions reject (counters without
// _total, gauges with it): promtool check metrics failed on 70 families.
// The values come from the runtime (runtime.ReadMemStats) and from gopsutil,
// which kdiag reads other processes with anyway: not from procfs, the
// library client_golang's process collector uses, whose package init ran
// in every kdiag command (0.2 ms and 30 pages of heap; issue 17) for the
// few lines of /proc/self read here.
var (
	famGoroutines = Family{"go_goroutines", "gauge", "Number of goroutines that currently exist."}
	famThreads    = Family{"go_threads", "gauge", "Number of OS threads created."}
	famGoInfo     = Family{"go_info", "gauge", "Information about the Go environment."}
	famAlloc      = Family{"go_memstats_alloc_bytes", "gauge", "Number of bytes allocated in heap and currently in use."}
	famSys        = Family{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system."}
	famGCCycles   = Family{"go_gc_cycles_total", "counter", "Count of all completed GC cycles."}
	famMemLimit   = Family{"go_gc_gomemlimit_bytes", "gauge", "Go runtime memory limit configured by the user, otherwise math.MaxInt64."}
	famCPU        = Family{"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."}
	famRSS        = Family{"process_resident_memory_bytes", "gauge", "Resident memory size in bytes."}
	famRSSPeak    = Family{"process_resident_memory_peak_bytes", "gauge", "Peak resident memory size in bytes (VmHWM)."}
	famVSZ        = Family{"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."}
	famStart      = Family{"process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds."}
	famOpenFDs    = Family{"process_open_fds", "gauge", "Number of open file descriptors."}
	famMaxFDs     = Family{"process_max_fds", "gauge", "Maximum number of open file descriptors."}
)

// writeProcess writes kdiag's own go_ and process_ metrics. What cannot be
// read (no /proc: not Linux) is left out.
func writeProcess(e *exposition) {
	e.sample(famGoroutines, float64(runtime.NumGoroutine()))
	e.sample(famThreads, float64(pprof.Lookup("threadcreate").Count()))
	e.sample(famGoInfo, 1, "version", runtime.Version())
	// runtime.ReadMemStats, not runtime/metrics, whose package init (a
	// table of every runtime metric, 15 KB) ran in every kdiag command
	// (issue 17). It stops the world for a few microseconds, once a scrape.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.sample(famAlloc, float64(ms.HeapAlloc))
	e.sample(famSys, float64(ms.Sys))
	e.sample(famGCCycles, float64(ms.NumGC))
	e.sample(famMemLimit, float64(debug.SetMemoryLimit(-1)))

	// kdiag's own /proc (never HOST_PROC, which gopsutil would otherwise
	// read), and the pid that /proc numbers it by, as /proc/self would.
	ctx := context.WithValue(context.Background(), common.EnvKey, common.EnvMap{common.HostProcEnvKey: "/proc"})
	pid := os.Getpid()
	if s, err := os.Readlink("/proc/self"); err == nil {
		if n, err := strconv.Atoi(s); err == nil {
			pid = n
		}
	}
	p, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		return
	}
	if t, err := p.TimesWithContext(ctx); err == nil {
		e.sample(famCPU, t.User+t.System)
	}
	if m, err := p.MemoryInfoWithContext(ctx); err == nil {
		e.sample(famRSS, float64(m.RSS))
		e.sample(famVSZ, float64(m.VMS))
	}
	if ms, err := p.CreateTimeWithContext(ctx); err == nil {
		e.sample(famStart, float64(ms)/1000)
	}
	if hwm, ok := vmHWM("/proc/self/status"); ok {
		e.sample(famRSSPeak, hwm)
	}
	if n, err := p.NumFDsWithContext(ctx); err == nil {
		e.sample(famOpenFDs, float64(n))
	}
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		e.sample(famMaxFDs, float64(l.Cur))
	}
}

// vmHWM returns the peak resident set size in bytes from the VmHWM line of
// a /proc/<pid>/status file. Not getrusage's ru_maxrss: that keeps the
// peak of what the process was before its execve.
func vmHWM(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return float64(kb) * 1024, err == nil
		}
	}
	return 0, false
}
