package metrics

import (
	"runtime"
	"runtime/metrics"
	"runtime/pprof"

	"github.com/prometheus/procfs"
)

// kdiag's own go_ and process_ families, under the names and with the help
// texts of client_golang's Go and process collectors, so that dashboards
// made for any Go exporter read them. They are written here because
// VictoriaMetrics/metrics' WriteProcessMetrics, used before, gives no help
// text and names that Prometheus's conventions reject (counters without
// _total, gauges with it): promtool check metrics failed on 70 families.
// The values come from the runtime (runtime/metrics) and from procfs, the
// library client_golang's process collector reads /proc with.
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

// runtimeSamples are the runtime/metrics read for the go_ families, in
// this order.
var runtimeSamples = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/total:bytes", "/gc/cycles/total:gc-cycles", "/gc/gomemlimit:bytes"}

// writeProcess writes kdiag's own go_ and process_ metrics. What cannot be
// read (no /proc: not Linux) is left out.
func writeProcess(e *exposition) {
	e.sample(famGoroutines, float64(runtime.NumGoroutine()))
	e.sample(famThreads, float64(pprof.Lookup("threadcreate").Count()))
	e.sample(famGoInfo, 1, "version", runtime.Version())
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, name := range runtimeSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	for i, f := range []Family{famAlloc, famSys, famGCCycles, famMemLimit} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			e.sample(f, float64(s[i].Value.Uint64()))
		}
	}

	p, err := procfs.Self()
	if err != nil {
		return
	}
	if st, err := p.Stat(); err == nil {
		e.sample(famCPU, st.CPUTime())
		e.sample(famRSS, float64(st.ResidentMemory()))
		e.sample(famVSZ, float64(st.VirtualMemory()))
		if start, err := st.StartTime(); err == nil {
			e.sample(famStart, start)
		}
	}
	if status, err := p.NewStatus(); err == nil {
		e.sample(famRSSPeak, float64(status.VmHWM))
	}
	if n, err := p.FileDescriptorsLen(); err == nil {
		e.sample(famOpenFDs, float64(n))
	}
	if l, err := p.Limits(); err == nil {
		e.sample(famMaxFDs, float64(l.OpenFiles))
	}
}
