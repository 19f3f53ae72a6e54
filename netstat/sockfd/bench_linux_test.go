package sockfd

import "testing"

// BenchmarkOpen: parsing the kernel's BTF and loading the program, what a
// one-shot scan pays before its first pass.
func BenchmarkOpen(b *testing.B) {
	for b.Loop() {
		it := open(b, true)
		it.Close()
	}
}

// BenchmarkEach: one pass over every socket fd of the processes this test
// can see (run it beside bench/mksockets for a size), fds counted.
func BenchmarkEach(b *testing.B) {
	for _, proto := range []bool{false, true} {
		name := "inode"
		if proto {
			name = "proto"
		}
		b.Run(name, func(b *testing.B) {
			it := open(b, proto)
			n := 0
			for b.Loop() {
				n = 0
				if err := it.Each(func(FD) bool { n++; return true }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "fds")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(n, 1)), "ns/fd")
		})
	}
}
