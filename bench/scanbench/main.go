// Command scanbench times commands against each other in the same run:
// it runs each command -runs times, alternating which goes first, output to
// /dev/null, and prints for each the median wall time and the peak resident
// set size (getrusage ru_maxrss of the child), as a Markdown table row.
//
//	scanbench -runs 7 -- 'kdiag scan --state close-wait -o json' 'ss -tanp state close-wait'
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
	"strings"
	"syscall"
	"time"
)

type result struct {
	wall []time.Duration
	rss  []int64 // KiB
}

func main() {
	runs := flag.Int("runs", 7, "runs of each command")
	label := flag.String("label", "", "first column of the Markdown rows (e.g. N=1000 M=0)")
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
			args := strings.Fields(cmds[i])
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Stdout = null
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			wall := time.Since(start)
			if err != nil && cmd.ProcessState == nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", cmds[i], err)
				os.Exit(1)
			}
			if !cmd.ProcessState.Success() {
				fmt.Fprintf(os.Stderr, "%s: %v\n%s", cmds[i], err, stderr.String())
				os.Exit(1)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			res[i].wall = append(res[i].wall, wall)
			res[i].rss = append(res[i].rss, ru.Maxrss)
		}
	}
	fmt.Printf("| size | command | median wall | min wall | max wall | median peak RSS | max peak RSS | runs |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i, c := range cmds {
		w, m := slices.Clone(res[i].wall), slices.Clone(res[i].rss)
		slices.Sort(w)
		slices.Sort(m)
		fmt.Printf("| %s | `%s` | %s | %s | %s | %.1f MB | %.1f MB | %d |\n", *label, c,
			ms(w[len(w)/2]), ms(w[0]), ms(w[len(w)-1]), float64(m[len(m)/2])/1024, float64(m[len(m)-1])/1024, *runs)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
