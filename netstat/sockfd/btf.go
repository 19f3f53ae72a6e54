package sockfd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBTF is wrapped by the errors of parseBTF: the kernel's BTF is not
// what it should be, or lacks a type or member the program reads.
var ErrBTF = errors.New("kernel BTF")

// layout is what the iterator program needs from the running kernel's BTF:
// the offsets (in bytes) of the members it reads, the size of struct upid
// (an element of struct pid's numbers[]) and the BTF id of the iterator's
// target function, bpf_iter_task_file (the program's attach_btf_id).
type layout struct {
	fileInode       uint32 // struct file: f_inode
	inodeIno        uint32 // struct inode: i_ino
	socketType      uint32 // struct socket: type
	socketSk        uint32 // struct socket: sk
	skcFamily       uint32 // struct sock_common: skc_family (struct sock starts with one)
	skcState        uint32 // struct sock_common: skc_state (an unsigned char, beside skc_family)
	skProtocol      uint32 // struct sock: sk_protocol (a u16 since Linux 5.6)
	taskGroupLeader uint32 // struct task_struct: group_leader
	taskThreadPid   uint32 // struct task_struct: thread_pid
	pidLevel        uint32 // struct pid: level
	pidNumbers      uint32 // struct pid: numbers[]
	upidNr          uint32 // struct upid: nr
	upidSize        uint32 // sizeof(struct upid)
	iterFunc        uint32 // BTF id of FUNC bpf_iter_task_file
}

// want lists, for each struct the program reads, the members it needs and
// where layout keeps their offsets.
type wantMember struct {
	name string
	dst  func(*layout) *uint32
	// whole means the member must not be a bitfield (it is read whole).
	whole bool
}

var wantStructs = map[string][]wantMember{
	"file":        {{"f_inode", func(l *layout) *uint32 { return &l.fileInode }, true}},
	"inode":       {{"i_ino", func(l *layout) *uint32 { return &l.inodeIno }, true}},
	"socket":      {{"type", func(l *layout) *uint32 { return &l.socketType }, true}, {"sk", func(l *layout) *uint32 { return &l.socketSk }, true}},
	"sock_common": {{"skc_family", func(l *layout) *uint32 { return &l.skcFamily }, true}, {"skc_state", func(l *layout) *uint32 { return &l.skcState }, true}},
	"sock":        {{"sk_protocol", func(l *layout) *uint32 { return &l.skProtocol }, true}},
	"task_struct": {
		{"group_leader", func(l *layout) *uint32 { return &l.taskGroupLeader }, true},
		{"thread_pid", func(l *layout) *uint32 { return &l.taskThreadPid }, true},
	},
	"pid": {
		{"level", func(l *layout) *uint32 { return &l.pidLevel }, true},
		{"numbers", func(l *layout) *uint32 { return &l.pidNumbers }, true},
	},
	"upid": {{"nr", func(l *layout) *uint32 { return &l.upidNr }, true}},
}

// iterFuncName is the function the kernel declares for the task_file
// iterator (DEFINE_BPF_ITER_FUNC(task_file, ...) in kernel/bpf/task_iter.c).
const iterFuncName = "bpf_iter_task_file"

// BTF kinds and sizes (include/uapi/linux/btf.h).
const (
	btfMagic        = 0xeb9f
	kindInt         = 1
	kindArray       = 3
	kindStruct      = 4
	kindUnion       = 5
	kindEnum        = 6
	kindFunc        = 12
	kindFuncProto   = 13
	kindVar         = 14
	kindDatasec     = 15
	kindDeclTag     = 17
	kindEnum64      = 19
	btfTypeSize     = 12 // struct btf_type
	btfMemberSize   = 12 // struct btf_member
	btfHeaderMinLen = 24 // struct btf_header up to str_len
)

// parseBTF reads what layout needs from raw BTF (the kernel's
// /sys/kernel/btf/vmlinux, mapped or read by the caller) in one pass, and
// keeps nothing else: cilium/ebpf's btf.LoadKernelSpec indexes every one of
// the ~150,000 types of vmlinux (measured here: 21-42 ms a call, and a
// kdiag scan would make two), where the iterator needs twelve member
// offsets, a struct's size and one function's id.
//
// The format is the kernel's (Documentation/bpf/btf.rst): a header, then
// the type section (struct btf_type records, each followed by data whose
// size depends on its kind; type ids count from 1 in order) and the string
// section (NUL-terminated names, referred to by offset). Names are matched
// by offset, so the strings are read first; vmlinux's BTF is one
// deduplicated set, so each name the program needs is there once (a name
// found twice keeps its first offset, and a type named by the other is
// then not found: an error, never a wrong offset).
func parseBTF(b []byte) (layout, error) {
	var l layout
	if len(b) < btfHeaderMinLen {
		return l, fmt.Errorf("%w: %d bytes, shorter than a header", ErrBTF, len(b))
	}
	bo := binary.LittleEndian
	if bo.Uint16(b[0:]) != btfMagic {
		if binary.BigEndian.Uint16(b[0:]) == btfMagic {
			return l, fmt.Errorf("%w: big-endian BTF is not supported", ErrBTF)
		}
		return l, fmt.Errorf("%w: bad magic %#x", ErrBTF, b[0:2])
	}
	hdrLen := uint64(bo.Uint32(b[4:]))
	typeOff, typeLen := hdrLen+uint64(bo.Uint32(b[8:])), uint64(bo.Uint32(b[12:]))
	strOff, strLen := hdrLen+uint64(bo.Uint32(b[16:])), uint64(bo.Uint32(b[20:]))
	size := uint64(len(b))
	if hdrLen < btfHeaderMinLen || typeOff+typeLen > size || strOff+strLen > size {
		return l, fmt.Errorf("%w: sections past the end (%d bytes)", ErrBTF, size)
	}
	types, strs := b[typeOff:typeOff+typeLen], b[strOff:strOff+strLen]

	offs := findStrings(strs, wantNames())
	// The wanted structs by the offset of their name, and each one's
	// members by the offset of theirs.
	type wantStruct struct {
		name    string
		nameOff uint32
		members []wantMember
		offs    []uint32 // the members' name offsets
		found   bool
	}
	var ws []wantStruct
	for s, ms := range wantStructs {
		o, ok := offs[s]
		if !ok {
			continue
		}
		w := wantStruct{name: s, nameOff: o, members: ms}
		for _, m := range ms {
			w.offs = append(w.offs, offs[m.name]) // 0 (the empty name) when absent
		}
		ws = append(ws, w)
	}
	funcOff, haveFunc := offs[iterFuncName]
	// The walk stops once it has every struct and the function: in 6.18's
	// vmlinux the structs are in the first 5% of the types and the
	// function at 63%, and the rest is pages not read (each a fault in a
	// new process; BenchmarkKernelLayout).
	left := len(ws)
	if haveFunc {
		left++
	}

	var upidSize uint32
	pos := uint64(0)
	for id := uint32(1); pos < typeLen && left > 0; id++ {
		if typeLen-pos < btfTypeSize {
			return l, fmt.Errorf("%w: type %d cut short", ErrBTF, id)
		}
		t := types[pos:]
		nameOff, info, sizeOrType := bo.Uint32(t[0:]), bo.Uint32(t[4:]), bo.Uint32(t[8:])
		kind, vlen, kflag := (info>>24)&0x1f, uint64(info&0xffff), info>>31 != 0
		pos += btfTypeSize
		var extra uint64
		switch kind {
		case kindInt, kindVar, kindDeclTag:
			extra = 4
		case kindArray:
			extra = 12
		case kindStruct, kindUnion, kindDatasec, kindEnum64:
			extra = 12 * vlen
		case kindEnum, kindFuncProto:
			extra = 8 * vlen
		case kindFunc:
			if haveFunc && nameOff == funcOff && l.iterFunc == 0 {
				l.iterFunc = id
				left--
			}
		}
		if typeLen-pos < extra {
			return l, fmt.Errorf("%w: type %d cut short", ErrBTF, id)
		}
		if kind == kindStruct {
			for i := range ws {
				w := &ws[i]
				if w.nameOff != nameOff || w.found {
					continue
				}
				w.found = true
				left--
				if w.name == "upid" {
					upidSize = sizeOrType
				}
				for k := range vlen {
					m := types[pos+k*btfMemberSize:]
					mOff := bo.Uint32(m[0:])
					off, bits := bo.Uint32(m[8:]), uint32(0)
					if kflag {
						off, bits = off&0xffffff, off>>24
					}
					for j, wm := range w.members {
						if w.offs[j] == 0 || w.offs[j] != mOff {
							continue
						}
						if (wm.whole && bits != 0) || off%8 != 0 {
							return l, fmt.Errorf("%w: %s.%s is a bitfield (bit %d, %d bits): this kernel is older than the iterator supports", ErrBTF, w.name, wm.name, off, bits)
						}
						*wm.dst(&l) = off/8 + 1 // +1: 0 means not found
					}
				}
			}
		}
		pos += extra
	}
	var missing []string
	for _, w := range ws {
		if !w.found {
			continue
		}
		for _, m := range w.members {
			if *m.dst(&l) == 0 {
				missing = append(missing, w.name+"."+m.name)
			}
			*m.dst(&l)-- // undo the +1
		}
	}
	for s := range wantStructs {
		found := false
		for _, w := range ws {
			found = found || (w.name == s && w.found)
		}
		if !found {
			missing = append(missing, "struct "+s)
		}
	}
	if l.iterFunc == 0 {
		missing = append(missing, iterFuncName)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return layout{}, fmt.Errorf("%w: no %s", ErrBTF, strings.Join(missing, ", "))
	}
	l.upidSize = upidSize
	return l, nil
}

// wantNames returns every name parseBTF looks for.
func wantNames() []string {
	names := []string{iterFuncName}
	for s, ms := range wantStructs {
		names = append(names, s)
		for _, m := range ms {
			names = append(names, m.name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// findStrings returns the offsets in the string section b of the names it
// holds among want: a name starts at offset 0 or after a NUL, and ends at a
// NUL. Only strings as long as a wanted name are compared, and the scan
// stops once it has them all (in 6.18's vmlinux, 61% of the way in).
func findStrings(b []byte, want []string) map[string]uint32 {
	var byLen [32][]string
	for _, w := range want {
		if len(w) < len(byLen) {
			byLen[len(w)] = append(byLen[len(w)], w)
		}
	}
	out := make(map[string]uint32, len(want))
	for i := 0; i < len(b) && len(out) < len(want); {
		j := bytes.IndexByte(b[i:], 0)
		if j < 0 {
			break
		}
		if j < len(byLen) {
			for _, w := range byLen[j] {
				if string(b[i:i+j]) == w {
					if _, dup := out[w]; !dup {
						out[w] = uint32(i)
					}
				}
			}
		}
		i += j + 1
	}
	return out
}
