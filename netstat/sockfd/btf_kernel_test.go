package sockfd

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func kernelBTF(t testing.TB) []byte {
	f, err := os.Open("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	return b
}

func TestParseKernelBTF(t *testing.T) {
	b := kernelBTF(t)
	t0 := time.Now()
	l, err := parseBTF(b)
	t.Logf("%v %+v", time.Since(t0), l)
	if err != nil {
		t.Fatal(err)
	}
}

func BenchmarkParseKernelBTF(b *testing.B) {
	raw := kernelBTF(b)
	for b.Loop() {
		if _, err := parseBTF(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKernelLayout: what Open pays for the layout, the kernel's BTF
// mapped afresh each time as in a new process, so that the pages it reads
// are faulted in again (BenchmarkParseKernelBTF reads them mapped once).
func BenchmarkKernelLayout(b *testing.B) {
	if _, err := os.Stat(vmlinuxBTF); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := kernelLayout(); err != nil {
			b.Fatal(err)
		}
	}
}
