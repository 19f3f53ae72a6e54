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

// Counter is an attached tracepoint program and the maps it uses.
type Counter struct {
	counts *ebpf.Map
	ports  *ebpf.Map // nil without a port filter
	prog   *ebpf.Program
	link   link.Link
}

// maxPorts bounds the remote ports Open filters on; a longer list is not
// filtered (a superset of changes is always correct, only less useful).
const maxPorts = 1024

// Open loads and attaches the counting program. With remotePorts, only
// changes of sockets whose remote port is one of them are counted: a watch
// of the sockets to Kafka brokers is then not woken by the rest of the
// host's connections (its own metrics scrapes included). The error wraps
// ErrUnavailable when this system does not allow it.
func Open(remotePorts ...uint16) (*Counter, error) {
	if len(remotePorts) > maxPorts {
		remotePorts = nil
	}
	c := &Counter{}
	var err error
	c.counts, err = newMap(&ebpf.MapSpec{
		Name:       "kdiag_tcp_states",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  uint32(unsafe.Sizeof(Counts{})),
		MaxEntries: 1,
	})
	if err != nil {
		return nil, unavailable("create map", err)
	}
	portsFD := -1
	if len(remotePorts) > 0 {
		c.ports, err = newMap(&ebpf.MapSpec{
			Name:       "kdiag_tcp_ports",
			Type:       ebpf.Hash,
			KeySize:    2,
			ValueSize:  1,
			MaxEntries: uint32(len(remotePorts)),
		})
		if err != nil {
			c.Close()
			return nil, unavailable("create port map", err)
		}
		for _, p := range remotePorts {
			// The key is the port as the socket holds it: network order.
			if err := c.ports.Update([2]byte{byte(p >> 8), byte(p)}, uint8(1), ebpf.UpdateAny); err != nil {
				c.Close()
				return nil, unavailable("fill port map", err)
			}
		}
		portsFD = c.ports.FD()
	}
	// bpf_probe_read_kernel is Linux 5.5; before it, bpf_probe_read.
	for _, read := range []asm.BuiltinFunc{asm.FnProbeReadKernel, asm.FnProbeRead} {
		c.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         "kdiag_tcp_state",
			Type:         ebpf.RawTracepoint,
			License:      "Dual MIT/GPL",
			Instructions: program(c.counts.FD(), portsFD, read),
		})
		if err == nil || portsFD < 0 {
			break
		}
	}
	if err != nil {
		c.Close()
		return nil, unavailable("load program", err)
	}
	c.link, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: c.prog})
	if err != nil {
		c.Close()
		return nil, unavailable("attach to "+tracepoint, err)
	}
	return c, nil
}

// newMap creates a map, lifting RLIMIT_MEMLOCK once if refused: kernels
// before 5.11 charge BPF memory to it (64 KiB by default) and refuse with
// EPERM past it.
func newMap(spec *ebpf.MapSpec) (*ebpf.Map, error) {
	m, err := ebpf.NewMap(spec)
	if errors.Is(err, unix.EPERM) && raiseMemlock() == nil {
		m, err = ebpf.NewMap(spec)
	}
	return m, err
}

// skcDport is the offset of skc_dport in struct sock_common, which starts
// every struct sock: skc_daddr and skc_rcv_saddr (4 bytes each), skc_hash
// (4), then skc_dport and skc_num. That layout has not changed since the
// fields were introduced (Linux 2.6.x), which is what lets the program read
// it without BTF.
const skcDport = 12

// program is the tracepoint's handler, written with cilium/ebpf's assembler
// rather than compiled from C: it is a few dozen instructions, and needs
// neither clang at build time nor BTF at run time (a raw tracepoint's
// arguments are the tracepoint's own, fixed since Linux 4.16: the socket,
// the old state, the new state). It adds one to counts[old*16+new], both
// states masked to 4 bits so that the verifier can prove the offset inside
// the value. With portsFD >= 0 it first reads the socket's remote port
// (with read, a probe-read helper) and counts only the ports in that map;
// a failed read counts, since a change too many is harmless.
func program(countsFD, portsFD int, read asm.BuiltinFunc) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R6, asm.R1, 8, asm.DWord),  // oldstate
		asm.LoadMem(asm.R7, asm.R1, 16, asm.DWord), // newstate
	}
	if portsFD >= 0 {
		insns = append(insns,
			asm.LoadMem(asm.R3, asm.R1, 0, asm.DWord), // sk
			asm.Add.Imm(asm.R3, skcDport),
			asm.Mov.Imm(asm.R2, 0),
			asm.StoreMem(asm.RFP, -8, asm.R2, asm.DWord),
			asm.Mov.Reg(asm.R1, asm.RFP),
			asm.Add.Imm(asm.R1, -8),
			asm.Mov.Imm(asm.R2, 2),
			read.Call(),
			asm.JNE.Imm(asm.R0, 0, "count"),
			asm.LoadMapPtr(asm.R1, portsFD),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
		)
	}
	return append(insns,
		asm.And.Imm(asm.R6, States-1).WithSymbol("count"),
		asm.And.Imm(asm.R7, States-1),
		asm.LSh.Imm(asm.R6, 4),
		asm.Or.Reg(asm.R6, asm.R7),
		asm.LSh.Imm(asm.R6, 3), // byte offset of the uint64
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, countsFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Add.Reg(asm.R0, asm.R6),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
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

// Close detaches the program and frees the maps. It may be called on a
// Counter that Open left half made.
func (c *Counter) Close() error {
	var errs []error
	if c.link != nil {
		errs = append(errs, c.link.Close())
	}
	if c.prog != nil {
		errs = append(errs, c.prog.Close())
	}
	if c.ports != nil {
		errs = append(errs, c.ports.Close())
	}
	if c.counts != nil {
		errs = append(errs, c.counts.Close())
	}
	return errors.Join(errs...)
}
