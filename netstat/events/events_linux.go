package events

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// tracepoint is the kernel's TCP state tracepoint. Its raw arguments are
// (const struct sock *sk, const int oldstate, const int newstate).
const tracepoint = "inet_sock_set_state"

// Counter is an attached tracepoint program and the map it counts in.
type Counter struct {
	counts *ebpf.Map
	prog   *ebpf.Program
	link   link.Link
}

// Open loads and attaches the counting program. The error wraps
// ErrUnavailable when this system does not allow it.
func Open() (*Counter, error) {
	spec := &ebpf.MapSpec{
		Name:       "kdiag_tcp_states",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  uint32(unsafe.Sizeof(Counts{})),
		MaxEntries: 1,
	}
	m, err := ebpf.NewMap(spec)
	if errors.Is(err, unix.EPERM) && raiseMemlock() == nil {
		// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK (64 KiB
		// by default), and refuse with EPERM past it.
		m, err = ebpf.NewMap(spec)
	}
	if err != nil {
		return nil, unavailable("create map", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "kdiag_tcp_state",
		Type:         ebpf.RawTracepoint,
		License:      "Dual MIT/GPL",
		Instructions: program(m.FD()),
	})
	if err != nil {
		m.Close()
		return nil, unavailable("load program", err)
	}
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: prog})
	if err != nil {
		prog.Close()
		m.Close()
		return nil, unavailable("attach to "+tracepoint, err)
	}
	return &Counter{counts: m, prog: prog, link: l}, nil
}

// program is the tracepoint's handler, written with cilium/ebpf's assembler
// rather than compiled from C: it is ten instructions, and needs neither
// clang at build time nor BTF at run time (a raw tracepoint's arguments are
// the tracepoint's own, fixed since Linux 4.16). It adds one to
// counts[old*16+new], both states masked to 4 bits so that the verifier can
// prove the offset inside the value.
func program(mapFD int) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R6, asm.R1, 8, asm.DWord),  // oldstate
		asm.LoadMem(asm.R7, asm.R1, 16, asm.DWord), // newstate
		asm.And.Imm(asm.R6, States-1),
		asm.And.Imm(asm.R7, States-1),
		asm.LSh.Imm(asm.R6, 4),
		asm.Or.Reg(asm.R6, asm.R7),
		asm.LSh.Imm(asm.R6, 3), // byte offset of the uint64
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Add.Reg(asm.R0, asm.R6),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// raiseMemlock lifts RLIMIT_MEMLOCK for the kernels that charge BPF maps
// to it. It is cilium/ebpf's rlimit.RemoveMemlock in two lines: that
// package probes the kernel with a BPF map in its init, which every kdiag
// start (kdiag scan included) would pay for.
func raiseMemlock() error {
	return unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
}

// unavailable wraps every failure in ErrUnavailable: a refusal
// (EPERM), a kernel without the tracepoint and a verifier rejection all
// leave the caller to scan without events.
func unavailable(what string, err error) error {
	if errors.Is(err, unix.EPERM) {
		// cilium/ebpf's own text for it suggests raising RLIMIT_MEMLOCK,
		// which Open has done where it can; what is missing is privilege.
		return fmt.Errorf("%w: %s: not permitted (needs root, or CAP_BPF and CAP_PERFMON)", ErrUnavailable, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, what, err)
}

// Read returns the counts so far.
func (c *Counter) Read() (Counts, error) {
	var v Counts
	if err := c.counts.Lookup(uint32(0), &v); err != nil {
		return v, fmt.Errorf("read TCP state counts: %w", err)
	}
	return v, nil
}

// Close detaches the program and frees the map.
func (c *Counter) Close() error {
	return errors.Join(c.link.Close(), c.prog.Close(), c.counts.Close())
}
