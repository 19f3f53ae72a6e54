// Command scanbench times commands against each other in the same run:
// it runs each command -runs times, alternating which goes first, output to
// /dev/null, and prints for each the median wall time, the CPU time (user
// plus system) and the peak resident set size (getrusage of the child), as
// a Markdown table row, with the machine's 1-minute load average over that
// command's runs (the lowest and highest read before each run).
//
//	scanbench -runs 7 -- 'kdiag scan --state close-wait -o json' 'ss -tanp state close-wait'
//
// With -quiet L it first waits, up to -quiet-wait, for the 1-minute load to
// drop below L, and says whether it did: figures taken as claims need a
// quiet machine.
//
// Each command is split on spaces (no shell), so what is timed is the
// program itself, not a shell around it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type result struct {
	wall []time.Duration
	cpu  []time.Duration
	rss  []int64 // KiB
	// loads are the 1-minute load averages read before each run.
	loads []float64
}

// load1 returns the 1-minute load average (-1 when /proc/loadavg cannot
// be read).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// waitQuiet polls the load until it is below max or wait has passed, and
// says which on stderr.
func waitQuiet(max float64, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		l := load1()
		if l >= 0 && l < max {
			fmt.Fprintf(os.Stderr, "scanbench: load %.2f, below %.2f\n", l, max)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "scanbench: load %.2f still not below %.2f after %s: measuring anyway\n", l, max, wait)
			return
		}
		time.Sleep(5 * time.Second)
	}
}

func main() {
	runs := flag.Int("runs", 7, "runs of each command")
	label := flag.String("label", "", "first column of the Markdown rows (e.g. N=1000 M=0)")
	quiet := flag.Float64("quiet", 0, "wait until the 1-minute load is below this first (0: do not wait)")
	quietWait := flag.Duration("quiet-wait", 5*time.Minute, "wait at most this long for -quiet")
	exitOK := flag.String("exit-ok", "0", "comma list of exit codes that count as success (kdiag watch exits 3 when it could not see everything)")
	warmup := flag.Int("warmup", 0, "untimed runs of each command first (the page cache and the kernel's caches warmed, just after the sockets were made)")
	tsv := flag.String("tsv", "", "also append the rows, tab-separated, to this file (label, command, median, min, max wall ms, median CPU ms, median and max peak RSS MiB, runs, lowest and highest load)")
	flag.Parse()
	cmds := flag.Args()
	if len(cmds) == 0 {
		fmt.Fprintln(os.Stderr, "usage: scanbench [-runs N] [-label L] 'cmd args' 'cmd args' ...")
		os.Exit(2)
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *quiet > 0 {
		waitQuiet(*quiet, *quietWait)
	}
	for range *warmup {
		for _, c := range cmds {
			cmd := command(c, null)
			cmd.Stderr = null
			if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", c, err)
				os.Exit(1)
			}
		}
	}
	res := make([]result, len(cmds))
	for r := range *runs {
		order := make([]int, len(cmds))
		for i := range order {
			// Alternate: even runs in the given order, odd runs reversed.
			if r%2 == 0 {
				order[i] = i
			} else {
				order[i] = len(cmds) - 1 - i
			}
		}
		for _, i := range order {
			cmd := command(cmds[i], null)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			res[i].loads = append(res[i].loads, load1())
			start := time.Now()
			err := cmd.Run()
			wall := time.Since(start)
			if err != nil && cmd.ProcessState == nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", cmds[i], err)
				os.Exit(1)
			}
			if !okExit(*exitOK, cmd.ProcessState.ExitCode()) {
				fmt.Fprintf(os.Stderr, "%s: %v\n%s", cmds[i], err, stderr.String())
				os.Exit(1)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			res[i].wall = append(res[i].wall, wall)
			res[i].rss = append(res[i].rss, ru.Maxrss)
			res[i].cpu = append(res[i].cpu, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		}
	}
	fmt.Printf("| size | command | median wall | min wall | max wall | median CPU | median peak RSS | max peak RSS | runs | load |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var out *os.File
	if *tsv != "" {
		if out, err = os.OpenFile(*tsv, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer out.Close()
	}
	for i, c := range cmds {
		w, m, u, l := slices.Clone(res[i].wall), slices.Clone(res[i].rss), slices.Clone(res[i].cpu), slices.Clone(res[i].loads)
		slices.Sort(w)
		slices.Sort(m)
		slices.Sort(u)
		slices.Sort(l)
		fmt.Printf("| %s | `%s` | %s | %s | %s | %s | %.1f MB | %.1f MB | %d | %.2f-%.2f |\n", *label, c,
			ms(w[len(w)/2]), ms(w[0]), ms(w[len(w)-1]), ms(u[len(u)/2]), float64(m[len(m)/2])/1024, float64(m[len(m)-1])/1024, *runs, l[0], l[len(l)-1])
		if out != nil {
			fmt.Fprintf(out, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.2f\t%.2f\n", *label, c,
				msf(w[len(w)/2]), msf(w[0]), msf(w[len(w)-1]), msf(u[len(u)/2]), float64(m[len(m)/2])/1024, float64(m[len(m)-1])/1024, *runs, l[0], l[len(l)-1])
		}
	}
}

// okExit reports whether code is in list (a comma list of exit codes).
func okExit(list string, code int) bool {
	for _, f := range strings.Split(list, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n == code {
			return true
		}
	}
	return false
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", msf(d)) }

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// command makes the process of one command line (split on white space, no
// shell), its output to out.
func command(line string, out *os.File) *exec.Cmd {
	args := strings.Fields(line)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout = out
	return cmd
}
