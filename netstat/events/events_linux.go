package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
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

	// The transitions' side, all nil (and noTransitions set) where the
	// kernel cannot have them: ring is the ring buffer the program
	// writes transition records into, reader reads it, drops counts the
	// records the program could not write (ring full).
	ring          *ebpf.Map
	reader        *ringbuf.Reader
	drops         *ebpf.Map
	noTransitions error
	clock         clock
	// v6 is skc_v6_daddr's offset in struct sock_common on this kernel,
	// 0 when unknown (noIPv6 says why).
	v6     int16
	noIPv6 error
}

// maxPorts bounds the remote ports Open filters on; a longer list is not
// filtered (a superset of changes is always correct, only less useful).
const maxPorts = 1024

// Open loads and attaches the counting program. With remotePorts, only
// changes of sockets whose remote port is one of them are counted, and
// only their transitions recorded: a watch of the sockets to Kafka brokers
// is then not woken by the rest of the host's connections (its own metrics
// scrapes included). The error wraps ErrUnavailable when this system does
// not allow it.
//
// Where the kernel allows the counting but not the transitions (no BPF
// ring buffer before Linux 5.8, or a verifier that refuses the longer
// program), Open still succeeds: the Counter counts, and Transitions says
// why it has nothing.
func Open(remotePorts ...uint16) (*Counter, error) {
	return openCounter(remotePorts, 0, true)
}

// OpenExcept is Open, leaving out (neither counted nor recorded) the
// changes of sockets whose local or remote port is except: kdiag watch's
// own metrics listener, each of whose scrapes is a connection that would
// otherwise wake the next scan, scraped or not by a local client.
func OpenExcept(except uint16, remotePorts ...uint16) (*Counter, error) {
	return openCounter(remotePorts, except, true)
}

// openCounter is Open; without transitions it loads the counting program
// alone, as Open does where the kernel refuses the rest (the benchmarks
// compare the two).
func openCounter(remotePorts []uint16, except uint16, transitions bool) (*Counter, error) {
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
	spec := progSpec{counts: c.counts.FD(), ports: -1, ring: -1, drops: -1, except: except}
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
		spec.ports = c.ports.FD()
	}
	if !transitions {
		c.noTransitions = fmt.Errorf("%w: transitions not asked for", ErrUnavailable)
	} else if err := c.openTransitions(); err != nil {
		c.noTransitions = err
	} else {
		spec.ring, spec.drops, spec.v6 = c.ring.FD(), c.drops.FD(), c.v6
		// The ring buffer is Linux 5.8, bpf_probe_read_kernel 5.5.
		spec.read = asm.FnProbeReadKernel
		c.prog, err = loadProgram(spec)
		if err != nil {
			c.noTransitions = unavailable("load the program that records transitions", err)
			c.closeTransitions()
			spec.ring, spec.drops, spec.v6 = -1, -1, 0
		}
	}
	// Counting only: bpf_probe_read_kernel is Linux 5.5; before it,
	// bpf_probe_read.
	for _, read := range []asm.BuiltinFunc{asm.FnProbeReadKernel, asm.FnProbeRead} {
		if c.prog != nil {
			break
		}
		spec.read = read
		c.prog, err = loadProgram(spec)
		if err == nil || spec.ports < 0 {
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

func loadProgram(spec progSpec) (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "kdiag_tcp_state",
		Type:         ebpf.RawTracepoint,
		License:      "Dual MIT/GPL",
		Instructions: program(spec),
	})
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

// skcDport is the offset of skc_dport in struct sock_common
// (include/net/sock.h), which starts every struct sock. Its first 20 bytes
// are skc_daddr (0), skc_rcv_saddr (4), skc_hash (8), skc_dport (12),
// skc_num (14), skc_family (16), skc_state (18) and a byte of flags:
// before any pointer and any #ifdef, so the same on every architecture and
// configuration, which is what lets the program read them without BTF.
// They are in that order in a Linux 3.10 tree (skc_dport and skc_num had
// just moved into sock_common) and in mainline today (6.x), so on every
// kernel that has the tracepoint (4.16 and later). findV6Offset checks
// them against a real socket at Open all the same; where they are not
// there, Open records no transitions (the counting goes on: a port filter
// that reads the wrong bytes lets changes through or not, it cannot
// report a wrong socket).
const skcDport = 12

// progSpec is what program builds the handler from: the maps' fds (-1
// for one it does without), the probe-read helper, and skc_v6_daddr's
// offset (0: not read).
type progSpec struct {
	counts, ports int
	ring, drops   int
	read          asm.BuiltinFunc
	v6            int16
	// except, when not 0, is a port whose sockets' changes are left out
	// (as the local port skc_num or the remote skc_dport).
	except uint16
}

// program is the tracepoint's handler, written with cilium/ebpf's assembler
// rather than compiled from C: it is a few dozen instructions, and needs
// neither clang at build time nor BTF at run time (a raw tracepoint's
// arguments are the tracepoint's own, fixed since Linux 4.16: the socket,
// the old state, the new state). It adds one to counts[old*16+new], both
// states masked to 4 bits so that the verifier can prove the offset inside
// the value. With a ports map it first reads the socket's remote port
// (with read, a probe-read helper) and goes on only for the ports in that
// map; a failed read counts, since a change too many is harmless.
//
// With a ring buffer it then records ESTABLISHED -> CLOSE_WAIT and
// CLOSE_WAIT -> CLOSE changes (see record.go for the record): the time,
// the socket pointer, the first bytes of sock_common and, with v6 known,
// the two IPv6 addresses and the cookie. When the ring is full, or a read
// fails, it adds one to drops instead. Records are submitted without a
// wakeup (BPF_RB_NO_WAKEUP): nothing waits on the ring, Transitions polls
// it, and a wakeup would cost each record an irq_work.
func program(p progSpec) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R6, asm.R1, 8, asm.DWord),  // oldstate
		asm.LoadMem(asm.R7, asm.R1, 16, asm.DWord), // newstate
		asm.LoadMem(asm.R8, asm.R1, 0, asm.DWord),  // sk
	}
	if p.except != 0 {
		// skc_dport (network order) and skc_num (host order), read at
		// once; a failed read counts, as the port filter's does.
		insns = append(insns,
			asm.Mov.Reg(asm.R3, asm.R8),
			asm.Add.Imm(asm.R3, skcDport),
			asm.Mov.Imm(asm.R2, 0),
			asm.StoreMem(asm.RFP, -16, asm.R2, asm.DWord),
			asm.Mov.Reg(asm.R1, asm.RFP),
			asm.Add.Imm(asm.R1, -16),
			asm.Mov.Imm(asm.R2, 4),
			p.read.Call(),
			asm.JNE.Imm(asm.R0, 0, "excepted"),
			asm.LoadMem(asm.R1, asm.RFP, -16, asm.Half),
			asm.JEq.Imm(asm.R1, int32(netOrder(p.except)), "out"),
			asm.LoadMem(asm.R1, asm.RFP, -14, asm.Half),
			asm.JEq.Imm(asm.R1, int32(p.except), "out"),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("excepted"),
		)
	}
	if p.ports >= 0 {
		insns = append(insns,
			asm.Mov.Reg(asm.R3, asm.R8),
			asm.Add.Imm(asm.R3, skcDport),
			asm.Mov.Imm(asm.R2, 0),
			asm.StoreMem(asm.RFP, -8, asm.R2, asm.DWord),
			asm.Mov.Reg(asm.R1, asm.RFP),
			asm.Add.Imm(asm.R1, -8),
			asm.Mov.Imm(asm.R2, 2),
			p.read.Call(),
			asm.JNE.Imm(asm.R0, 0, "count"),
			asm.LoadMapPtr(asm.R1, p.ports),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
		)
	}
	insns = append(insns,
		// R9 = byte offset of counts[old&15][new&15]
		asm.Mov.Reg(asm.R9, asm.R6).WithSymbol("count"),
		asm.And.Imm(asm.R9, States-1),
		asm.LSh.Imm(asm.R9, 4),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.And.Imm(asm.R2, States-1),
		asm.Or.Reg(asm.R9, asm.R2),
		asm.LSh.Imm(asm.R9, 3),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, p.counts),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Add.Reg(asm.R0, asm.R9),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
	if p.ring >= 0 {
		insns = append(insns, record(p)...)
	}
	return append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
}

// record is program's transition part: R6, R7 and R8 hold the old state,
// the new state and the socket.
func record(p progSpec) asm.Instructions {
	insns := asm.Instructions{
		asm.JEq.Imm(asm.R6, tcpEstablished, "established"),
		asm.JNE.Imm(asm.R6, tcpCloseWait, "out"),
		asm.JNE.Imm(asm.R7, tcpClose, "out"),
		asm.Ja.Label("reserve"),
		asm.JNE.Imm(asm.R7, tcpCloseWait, "out").WithSymbol("established"),

		asm.LoadMapPtr(asm.R1, p.ring).WithSymbol("reserve"),
		asm.Mov.Imm(asm.R2, recSize),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.Mov.Reg(asm.R9, asm.R0), // the record

		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R9, recKtime, asm.R0, asm.DWord),
		asm.StoreMem(asm.R9, recSock, asm.R8, asm.DWord),
		asm.StoreMem(asm.R9, recOld, asm.R6, asm.Byte),
		asm.StoreMem(asm.R9, recNew, asm.R7, asm.Byte),
		asm.StoreImm(asm.R9, recNew+1, 0, asm.Half),

		asm.Mov.Reg(asm.R1, asm.R9),
		asm.Add.Imm(asm.R1, recDaddr),
		asm.Mov.Imm(asm.R2, skcCopy),
		asm.Mov.Reg(asm.R3, asm.R8),
		p.read.Call(),
		asm.JNE.Imm(asm.R0, 0, "discard"),
	}
	if p.v6 > 0 {
		// skc_v6_daddr, skc_v6_rcv_saddr and skc_cookie, whatever the
		// family: the cookie is wanted of every socket, and parseRecord
		// ignores an AF_INET socket's IPv6 fields.
		insns = append(insns,
			asm.Mov.Reg(asm.R1, asm.R9),
			asm.Add.Imm(asm.R1, recV6Dst),
			asm.Mov.Imm(asm.R2, v6Copy),
			asm.Mov.Reg(asm.R3, asm.R8),
			asm.Add.Imm(asm.R3, int32(p.v6)),
			p.read.Call(),
			asm.JNE.Imm(asm.R0, 0, "discard"),
		)
	} else {
		// The ring's memory holds what was there before: zero it.
		insns = append(insns, asm.Mov.Imm(asm.R1, 0))
		for off := int16(recV6Dst); off < recSize; off += 8 {
			insns = append(insns, asm.StoreMem(asm.R9, off, asm.R1, asm.DWord))
		}
	}
	return append(insns,
		asm.Mov.Reg(asm.R1, asm.R9).WithSymbol("submit"),
		asm.Mov.Imm(asm.R2, bpfRBNoWakeup),
		asm.FnRingbufSubmit.Call(),
		asm.Ja.Label("out"),

		asm.Mov.Reg(asm.R1, asm.R9).WithSymbol("discard"),
		asm.Mov.Imm(asm.R2, bpfRBNoWakeup),
		asm.FnRingbufDiscard.Call(),

		asm.StoreImm(asm.RFP, -4, 0, asm.Word).WithSymbol("drop"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, p.drops),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
}

// netOrder is port as a u16 load of its network-order bytes reads it on
// this host.
func netOrder(port uint16) uint16 {
	b := [2]byte{byte(port >> 8), byte(port)}
	return binary.NativeEndian.Uint16(b[:])
}

// bpfRBNoWakeup is BPF_RB_NO_WAKEUP (include/uapi/linux/bpf.h).
const bpfRBNoWakeup = 1

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
	errs = append(errs, c.closeTransitions())
	if c.ports != nil {
		errs = append(errs, c.ports.Close())
	}
	if c.counts != nil {
		errs = append(errs, c.counts.Close())
	}
	return errors.Join(errs...)
}
