// Command pagefault prints what a page fault costs on this machine: the
// time to touch each 4 KiB page of fresh anonymous memory once, per page.
// The bench scripts print it beside the load: a tool's time on a virtual
// machine whose faults are slow follows its resident memory (kdiag touches
// ~5,000 pages for a case D scan, ss ~1,000), so figures from machines, or
// days, of different fault costs do not compare.
//
// With -v it also tells where the cost lies: the first touch of pages the
// kernel has already populated (MADV_POPULATE_WRITE, Linux 5.14), which
// costs nothing more on bare metal or with nested paging, but costs an
// exit of its own where the hypervisor builds shadow page tables on
// access (as on the PVM guest BENCHMARKS.md was measured on); and a touch
// of 2 MiB transparent huge pages (MADV_HUGEPAGE), whose one fault maps
// 512 pages. Only the first line is printed without -v (bench/ab.sh reads
// it).
//
//	go run ./bench/pagefault
//	go run ./bench/pagefault -v
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"
	"unsafe"
)

const (
	size     = 32 << 20
	page     = 4096
	huge     = 2 << 20
	populate = 23 // MADV_POPULATE_WRITE
	hugepage = 14 // MADV_HUGEPAGE
)

func main() {
	verbose := flag.Bool("v", false, "also the first touch of populated pages and of huge pages")
	flag.Parse()
	fmt.Printf("%.2f us\n", median(func(m []byte) {}))
	if !*verbose {
		return
	}
	fmt.Printf("first touch after MADV_POPULATE_WRITE: %.2f us a page\n", median(func(m []byte) {
		if err := syscall.Madvise(m, populate); err != nil {
			fmt.Fprintln(os.Stderr, "pagefault: MADV_POPULATE_WRITE:", err)
			os.Exit(1)
		}
	}))
	fmt.Printf("with MADV_HUGEPAGE (2 MiB pages, where the kernel gives them): %.2f us a 4 KiB page\n", median(func(m []byte) {
		_ = syscall.Madvise(m, hugepage) // refused where THP is off: then the figure is 4 KiB faults'
	}))
}

// median maps size bytes five times, calls prepare on each (aligned to
// 2 MiB, so that huge pages can back it), times one write to every 4 KiB
// page, and returns the median time a page in microseconds.
func median(prepare func([]byte)) float64 {
	var per []float64
	for range 5 {
		mem, err := syscall.Mmap(-1, 0, size+huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pagefault:", err)
			os.Exit(1)
		}
		off := int((huge - uintptr(unsafe.Pointer(&mem[0]))%huge) % huge)
		m := mem[off : off+size]
		prepare(m)
		start := time.Now()
		for i := 0; i < size; i += page {
			m[i] = 1
		}
		per = append(per, float64(time.Since(start).Nanoseconds())/1000/(size/page))
		_ = syscall.Munmap(mem)
	}
	slices.Sort(per)
	return per[len(per)/2]
}
