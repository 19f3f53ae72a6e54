package sockfd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Iterator is the loaded program and its iterator link; each Each call
// reads one pass.
type Iterator struct {
	prog *ebpf.Program
	link *link.Iter
	buf  []byte
}

// vmlinuxBTF is where the running kernel publishes its BTF.
const vmlinuxBTF = "/sys/kernel/btf/vmlinux"

// Open loads the iterator program for the running kernel; with proto its
// records say each socket's family, type and protocol (FD.IsTCP), else
// those are 0. Its error wraps ErrUnavailable whenever the iterator
// cannot be had here.
func Open(proto bool) (*Iterator, error) {
	l, err := kernelLayout()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	fd, err := loadProgram(program(l, proto), l.iterFunc)
	if err != nil {
		return nil, fmt.Errorf("%w: load the program: %v", ErrUnavailable, err)
	}
	prog, err := ebpf.NewProgramFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		prog.Close()
		return nil, fmt.Errorf("%w: attach the iterator: %v", ErrUnavailable, err)
	}
	return &Iterator{prog: prog, link: it}, nil
}

// Close unloads the program.
func (it *Iterator) Close() error {
	return errors.Join(it.link.Close(), it.prog.Close())
}

// Each calls fn for every socket fd of every process, in pid order (and
// fd order within a process). fn returning false stops the pass early.
func (it *Iterator) Each(fn func(FD) bool) error {
	rc, err := it.link.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if it.buf == nil {
		it.buf = make([]byte, 64<<10)
	}
	buf, n := it.buf, 0
	stop := false
	for !stop {
		m, err := rc.Read(buf[n:])
		n += m
		rest := parseRecords(buf[:n], func(f FD) {
			if !stop && !fn(f) {
				stop = true
			}
		})
		n = copy(buf, rest)
		if err == io.EOF || (err == nil && m == 0) {
			break
		}
		if errors.Is(err, unix.EAGAIN) {
			// The kernel ends a read that visited a million fds
			// (MAX_ITER_OBJECTS, kernel/bpf/bpf_iter.c) without a
			// record; the next read goes on from there.
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// kernelLayout reads the running kernel's BTF: mapped where the kernel
// allows it (Linux 6.16 maps the BTF's own pages, which costs no resident
// memory), else read.
func kernelLayout() (layout, error) {
	f, err := os.Open(vmlinuxBTF)
	if err != nil {
		return layout{}, fmt.Errorf("kernel BTF: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return layout{}, err
	}
	if b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE); err == nil {
		defer unix.Munmap(b)
		return parseBTF(b)
	}
	b, err := io.ReadAll(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return layout{}, fmt.Errorf("read %s: %w", vmlinuxBTF, err)
	}
	return parseBTF(b)
}

// The context of a task_file iterator program: struct
// bpf_iter__task_file { struct bpf_iter_meta *meta; struct task_struct
// *task; u32 fd; struct file *file; } (kernel/bpf/task_iter.c; each field
// 8-byte aligned), and struct bpf_iter_meta's first field, the seq_file.
const (
	ctxMeta = 0
	ctxTask = 8
	ctxFD   = 16
	ctxFile = 24
	metaSeq = 0
)

// maxPIDNSLevel is MAX_PID_NS_LEVEL (include/linux/pid_namespace.h).
const maxPIDNSLevel = 32

// probeRead returns the instructions of bpf_probe_read_kernel(fp+dst,
// size, src+off), which go to "out" when the read fails.
func probeRead(dst int16, size int32, src asm.Register, off int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R3, src),
		asm.Add.Imm(asm.R3, off),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, int32(dst)),
		asm.Mov.Imm(asm.R2, size),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "out"),
	}
}

// Stack slots of the record the program writes (see recordSize), and
// below it two of scratch.
const (
	stackScratch  = -recordSize - 8
	stackScratch2 = -recordSize - 16
	stackRecord   = -recordSize
	stackInode    = stackRecord + recordInode
	stackPID      = stackRecord + recordPID
	stackFD       = stackRecord + recordFD
	stackFam      = stackRecord + recordFam
	stackType     = stackRecord + recordType
	stackProto    = stackRecord + recordProto
	stackState    = stackRecord + recordState
)

// program returns the iterator's program for the layout l. For each file it
// asks bpf_sock_from_file whether it is a socket (it compares the file's
// f_op with sockfs's), and for a socket writes one record with
// bpf_seq_write: the inode's i_ino, the process's pid, the fd, and with
// proto the socket's type and its sock's family, protocol and state (two more
// cache misses a socket: 690 against 490 ns a socket fd, 80,000 of them). The loads from the
// task, file, socket and sock are plain loads the verifier checks against
// the kernel's BTF (PTR_TO_BTF_ID) and turns into faulting-safe ones, so
// a field read where the kernel has no such member is refused at load
// time, not read wrong.
//
// The pid is the thread group's in the reader's namespace:
// group_leader->thread_pid->numbers[level].nr (struct pid in
// include/linux/pid.h: one struct upid per level, each with the number that
// namespace gives the task), level being the reader's own
// (current->thread_pid->level: the iterator runs in the read(2) of the
// task reading it, and walks that task's namespace, whose tasks all have a
// number at its level). User space cannot tell its level when its /proc is
// its namespace's own (NSpid starts there; NS_GET_PARENT stops there).
func program(l layout, proto bool) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R7, asm.R6, ctxTask, asm.DWord),
		asm.JEq.Imm(asm.R7, 0, "out"),
		asm.LoadMem(asm.R8, asm.R6, ctxFile, asm.DWord),
		asm.JEq.Imm(asm.R8, 0, "out"),
		asm.Mov.Reg(asm.R1, asm.R8),
		asm.FnSockFromFile.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R9, asm.R0), // struct socket *

		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, stackRecord, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, stackRecord+8, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, stackRecord+16, asm.R1, asm.DWord),

		asm.LoadMem(asm.R1, asm.R8, int16(l.fileInode), asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "out"),
		asm.LoadMem(asm.R1, asm.R1, int16(l.inodeIno), asm.DWord),
		asm.StoreMem(asm.RFP, stackInode, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R6, ctxFD, asm.Word),
		asm.StoreMem(asm.RFP, stackFD, asm.R1, asm.Word),
	}
	// The reader's level: current is the task reading the iterator.
	insns = append(insns,
		asm.FnGetCurrentTaskBtf.Call(),
		asm.LoadMem(asm.R1, asm.R0, int16(l.taskThreadPid), asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "out"),
		asm.LoadMem(asm.R1, asm.R1, int16(l.pidLevel), asm.Word),
		asm.JGT.Imm(asm.R1, maxPIDNSLevel, "out"),
		asm.Mul.Imm(asm.R1, int32(l.upidSize)),
		asm.StoreMem(asm.RFP, stackScratch2, asm.R1, asm.DWord),
	)
	// The leader's struct pid, as plain numbers (probe-read): the
	// verifier allows no variable offset from a BTF pointer.
	insns = append(insns, probeRead(stackScratch, 8, asm.R7, int32(l.taskGroupLeader))...)
	insns = append(insns,
		asm.LoadMem(asm.R3, asm.RFP, stackScratch, asm.DWord),
		asm.JEq.Imm(asm.R3, 0, "out"),
	)
	insns = append(insns, probeRead(stackScratch, 8, asm.R3, int32(l.taskThreadPid))...)
	insns = append(insns,
		asm.LoadMem(asm.R3, asm.RFP, stackScratch, asm.DWord),
		asm.JEq.Imm(asm.R3, 0, "out"),
		asm.LoadMem(asm.R1, asm.RFP, stackScratch2, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R1),
	)
	insns = append(insns, probeRead(stackPID, 4, asm.R3, int32(l.pidNumbers+l.upidNr))...)
	if proto {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R9, int16(l.socketType), asm.Half),
			asm.StoreMem(asm.RFP, stackType, asm.R1, asm.Half),
			asm.LoadMem(asm.R9, asm.R9, int16(l.socketSk), asm.DWord),
			asm.JEq.Imm(asm.R9, 0, "emit"),
			asm.LoadMem(asm.R1, asm.R9, int16(l.skcFamily), asm.Half),
			asm.StoreMem(asm.RFP, stackFam, asm.R1, asm.Half),
			asm.LoadMem(asm.R1, asm.R9, int16(l.skProtocol), asm.Half),
			asm.StoreMem(asm.RFP, stackProto, asm.R1, asm.Half),
			// Beside skc_family: no further cache miss.
			asm.LoadMem(asm.R1, asm.R9, int16(l.skcState), asm.Byte),
			asm.StoreMem(asm.RFP, stackState, asm.R1, asm.Byte),
		)
	}
	return append(insns,
		asm.LoadMem(asm.R1, asm.R6, ctxMeta, asm.DWord).WithSymbol("emit"),
		asm.LoadMem(asm.R1, asm.R1, metaSeq, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackRecord),
		asm.Mov.Imm(asm.R3, recordSize),
		asm.FnSeqWrite.Call(),

		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
}

// progLoadAttr is the BPF_PROG_LOAD part of union bpf_attr
// (include/uapi/linux/bpf.h) up to attach_btf_obj_fd. The program is
// loaded with this, not with cilium/ebpf's NewProgram, because that finds
// the iterator's target (attach_btf_id) by loading and indexing the whole
// kernel BTF, which parseBTF has just read what it needs from.
type progLoadAttr struct {
	progType           uint32
	insnCnt            uint32
	insns              uint64
	license            uint64
	logLevel           uint32
	logSize            uint32
	logBuf             uint64
	kernVersion        uint32
	progFlags          uint32
	progName           [16]byte
	progIfindex        uint32
	expectedAttachType uint32
	progBTFFd          uint32
	funcInfoRecSize    uint32
	funcInfo           uint64
	funcInfoCnt        uint32
	lineInfoRecSize    uint32
	lineInfo           uint64
	lineInfoCnt        uint32
	attachBTFID        uint32
	attachBTFObjFd     uint32
	_                  uint32
}

// loadProgram loads insns as a task_file iterator program (BPF_PROG_TYPE_
// TRACING, expected attach type BPF_TRACE_ITER, attached to the kernel
// function of BTF id target) and returns its fd. A refusal is retried with
// the verifier's log, which the error then carries.
func loadProgram(insns asm.Instructions, target uint32) (int, error) {
	var code bytes.Buffer
	if err := insns.Marshal(&code, byteOrder()); err != nil {
		return -1, err
	}
	license := []byte("GPL\x00") // bpf_seq_write and the BTF loads are GPL-only
	raw := code.Bytes()
	attr := progLoadAttr{
		progType:           uint32(ebpf.Tracing),
		insnCnt:            uint32(len(raw) / asm.InstructionSize),
		insns:              uint64(uintptr(unsafe.Pointer(&raw[0]))),
		license:            uint64(uintptr(unsafe.Pointer(&license[0]))),
		expectedAttachType: uint32(ebpf.AttachTraceIter),
		attachBTFID:        target,
	}
	copy(attr.progName[:], "kdiag_sockfd")
	defer runtime.KeepAlive(raw)
	defer runtime.KeepAlive(license)
	fd, err := bpfProgLoad(&attr)
	if err == nil {
		return fd, nil
	}
	if errors.Is(err, unix.EPERM) {
		return -1, fmt.Errorf("not permitted (needs root, or CAP_BPF and CAP_PERFMON): %w", err)
	}
	log := make([]byte, 64<<10)
	attr.logLevel, attr.logSize, attr.logBuf = 1, uint32(len(log)), uint64(uintptr(unsafe.Pointer(&log[0])))
	defer runtime.KeepAlive(log)
	if _, err2 := bpfProgLoad(&attr); err2 != nil {
		if i := bytes.IndexByte(log, 0); i >= 0 {
			log = log[:i]
		}
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		return -1, fmt.Errorf("%w: verifier: %s", err, lines[len(lines)-1])
	}
	return -1, err
}

// byteOrder is the host's, as cilium/ebpf's marshaller names it (it
// knows binary.LittleEndian and binary.BigEndian, not NativeEndian).
func byteOrder() binary.ByteOrder {
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// maxInterrupted bounds bpfProgLoad's retries of a load the verifier gave
// up on because a signal was pending (EAGAIN), as cilium/ebpf retries in
// internal/sys.BPF. With signals blocked only SIGSTOP and SIGKILL can
// still interrupt it (a stopped load comes back EAGAIN when continued);
// the bound keeps a storm from spinning here for ever.
const maxInterrupted = 100

// bpfProgLoad runs BPF_PROG_LOAD with every signal blocked on its thread.
// The verifier returns EAGAIN whenever a signal is pending, and a process
// that starts children gets SIGCHLD on any of its threads: CI's race run
// once failed a load that way. Blocked, a process-wide signal goes to
// another thread and a thread's own (the runtime's preemption SIGURG)
// waits the few microseconds of the load; no Go code runs meanwhile.
func bpfProgLoad(attr *progLoadAttr) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return -1, fmt.Errorf("block signals for the load: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	for try := 1; ; try++ {
		fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
		runtime.KeepAlive(attr)
		switch {
		case errno == 0:
			return int(fd), nil
		case errno == unix.EAGAIN && try < maxInterrupted:
			continue
		case errno == unix.EAGAIN:
			return -1, fmt.Errorf("the verifier was interrupted by a signal %d times in a row: %w", try, errno)
		}
		return -1, errno
	}
}
