// Command pagefault prints what a page fault costs on this machine: the
// time to touch each 4 KiB page of fresh anonymous memory once, per page.
// The bench scripts print it beside the load: a tool's time on a virtual
// machine whose faults are slow follows its resident memory (kdiag touches
// ~5,000 pages for a case D scan, ss ~1,000), so figures from machines, or
// days, of different fault costs do not compare.
package main

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"
)

func main() {
	const size, page = 32 << 20, 4096
	var per []float64
	for range 5 {
		mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pagefault:", err)
			os.Exit(1)
		}
		start := time.Now()
		for i := 0; i < size; i += page {
			mem[i] = 1
		}
		per = append(per, float64(time.Since(start).Nanoseconds())/1000/(size/page))
		_ = syscall.Munmap(mem)
	}
	slices.Sort(per)
	fmt.Printf("%.2f us\n", per[len(per)/2])
}
