package sockfd

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// btfBuilder writes raw BTF (Documentation/bpf/btf.rst) for tests: a
// header, the types as added, and a string section.
type btfBuilder struct {
	types []byte
	strs  []byte
	names map[string]uint32
	next  uint32 // the next type id
}

func newBTF() *btfBuilder {
	return &btfBuilder{strs: []byte{0}, names: map[string]uint32{"": 0}, next: 1}
}

func (b *btfBuilder) str(s string) uint32 {
	if o, ok := b.names[s]; ok {
		return o
	}
	o := uint32(len(b.strs))
	b.strs = append(append(b.strs, s...), 0)
	b.names[s] = o
	return o
}

func (b *btfBuilder) u32(v ...uint32) {
	for _, x := range v {
		b.types = binary.LittleEndian.AppendUint32(b.types, x)
	}
}

// typ adds a btf_type header and returns its id.
func (b *btfBuilder) typ(name string, kind, vlen uint32, kflag bool, sizeOrType uint32) uint32 {
	info := kind<<24 | vlen
	if kflag {
		info |= 1 << 31
	}
	b.u32(b.str(name), info, sizeOrType)
	b.next++
	return b.next - 1
}

type member struct {
	name       string
	bitOff     uint32
	bitfieldSz uint32
}

func (b *btfBuilder) strct(name string, size uint32, ms ...member) uint32 {
	kflag := false
	for _, m := range ms {
		kflag = kflag || m.bitfieldSz > 0
	}
	id := b.typ(name, kindStruct, uint32(len(ms)), kflag, size)
	for _, m := range ms {
		off := m.bitOff
		if kflag {
			off |= m.bitfieldSz << 24
		}
		b.u32(b.str(m.name), 1, off)
	}
	return id
}

func (b *btfBuilder) bytes() []byte {
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint16(hdr[0:], btfMagic)
	hdr[2] = 1
	binary.LittleEndian.PutUint32(hdr[4:], 24)
	binary.LittleEndian.PutUint32(hdr[8:], 0)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(b.types)))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(len(b.types)))
	binary.LittleEndian.PutUint32(hdr[20:], uint32(len(b.strs)))
	return append(append(hdr, b.types...), b.strs...)
}

// kernelLike builds BTF with every type parseBTF wants, at the offsets of
// the 6.18 kernel these tests were written on, among other kinds of types
// (an int, an array, an enum, a func proto, a union, a var and a datasec)
// whose data parseBTF must skip right. edit, when set, changes it first.
func kernelLike(edit func(b *btfBuilder, name string) bool) []byte {
	b := newBTF()
	b.typ("int", kindInt, 0, false, 4)
	b.u32(32)
	b.typ("", kindArray, 0, false, 0)
	b.u32(1, 1, 16)
	b.typ("sock_state", kindEnum, 2, false, 4)
	b.u32(b.str("A"), 0, b.str("B"), 1)
	b.typ("", kindFuncProto, 1, false, 1)
	b.u32(b.str("x"), 1)
	b.typ("u", kindUnion, 1, false, 8)
	b.u32(b.str("file"), 1, 0) // a member named like a wanted struct
	structs := []struct {
		name string
		size uint32
		ms   []member
	}{
		{"file", 256, []member{{"f_lock", 0, 0}, {"f_inode", 32 * 8, 0}}},
		{"inode", 600, []member{{"i_mode", 0, 0}, {"i_ino", 64 * 8, 0}}},
		{"socket", 128, []member{{"state", 0, 0}, {"type", 4 * 8, 0}, {"sk", 24 * 8, 0}}},
		{"sock_common", 136, []member{{"skc_family", 16 * 8, 0}, {"skc_state", 18 * 8, 0}}},
		{"sock", 760, []member{{"__sk_common", 0, 0}, {"sk_protocol", 532 * 8, 0}}},
		{"task_struct", 9000, []member{{"pid", 1264 * 8, 0}, {"group_leader", 1328 * 8, 0}, {"thread_pid", 1368 * 8, 0}}},
		{"pid", 144, []member{{"level", 4 * 8, 0}, {"numbers", 144 * 8, 0}}},
		{"upid", 16, []member{{"nr", 0, 0}, {"ns", 8 * 8, 0}}},
	}
	for _, s := range structs {
		if edit != nil && edit(b, s.name) {
			continue
		}
		b.strct(s.name, s.size, s.ms...)
	}
	b.typ("v", kindVar, 0, false, 1)
	b.u32(1)
	b.typ(".data", kindDatasec, 1, false, 8)
	b.u32(1, 0, 4)
	b.typ(iterFuncName, kindFunc, 0, false, 4)
	return b.bytes()
}

func TestParseBTF(t *testing.T) {
	got, err := parseBTF(kernelLike(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := layout{fileInode: 32, inodeIno: 64, socketType: 4, socketSk: 24, skcFamily: 16, skcState: 18, skProtocol: 532,
		taskGroupLeader: 1328, taskThreadPid: 1368, pidLevel: 4, pidNumbers: 144, upidNr: 0, upidSize: 16, iterFunc: 16}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(layout{})); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestParseBTFErrors(t *testing.T) {
	good := kernelLike(nil)
	tests := []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", nil, "shorter than a header"},
		{"bad magic", append([]byte{1, 2}, good[2:]...), "bad magic"},
		{"cut in the types", append(good[:24:24], good[24:60]...), "past the end"},
		{"no struct sock", kernelLike(func(b *btfBuilder, n string) bool { return n == "sock" }), "no struct sock"},
		{"no member", kernelLike(func(b *btfBuilder, n string) bool {
			if n != "inode" {
				return false
			}
			b.strct("inode", 600, member{"i_mode", 0, 0})
			return true
		}), "no inode.i_ino"},
		{"bitfield", kernelLike(func(b *btfBuilder, n string) bool {
			if n != "sock" {
				return false
			}
			// Linux before 5.6: sk_protocol was 8 bits of a word.
			b.strct("sock", 760, member{"sk_protocol", 532*8 + 8, 8})
			return true
		}), "bitfield"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseBTF(tt.raw)
			if !errors.Is(err, ErrBTF) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrBTF saying %q", err, tt.want)
			}
		})
	}
}

// TestParseBTFStopsOnceFound: the walk ends at the last thing it needs, so
// what follows is not read (in a new process, not faulted in): here a
// struct whose members run past the end of the types, which a walk to the
// end reports as cut short.
func TestParseBTFStopsOnceFound(t *testing.T) {
	good := kernelLike(nil)
	bo := binary.LittleEndian
	typeLen := bo.Uint32(good[12:])
	tail := bo.AppendUint32(nil, 0)
	tail = bo.AppendUint32(tail, kindStruct<<24|1000) // 1,000 members, none there
	tail = bo.AppendUint32(tail, 8)
	raw := slices.Concat(good[:24+typeLen], tail, good[24+typeLen:])
	bo.PutUint32(raw[12:], typeLen+uint32(len(tail)))
	bo.PutUint32(raw[16:], typeLen+uint32(len(tail)))
	want, err := parseBTF(good)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseBTF(raw)
	if err != nil {
		t.Fatalf("the tail was read: %v", err)
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func FuzzParseBTF(f *testing.F) {
	f.Add(kernelLike(nil))
	f.Add(kernelLike(func(b *btfBuilder, n string) bool { return n == "pid" }))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseBTF(b) // must not panic
	})
}

func TestParseRecords(t *testing.T) {
	rec := func(ino uint64, pid, fd uint32, fam, typ, proto uint16, state uint8) []byte {
		b := binary.NativeEndian.AppendUint64(nil, ino)
		b = binary.NativeEndian.AppendUint32(b, pid)
		b = binary.NativeEndian.AppendUint32(b, fd)
		b = binary.NativeEndian.AppendUint16(b, fam)
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = binary.NativeEndian.AppendUint16(b, proto)
		return append(b, state, 0)
	}
	in := append(rec(7, 100, 3, 2, 1, 6, TCPClose), rec(8, 100, 4, 1, 1, 0, 1)...)
	in = append(in, rec(9, 101, 5, 10, 1, 6, 1)[:10]...)
	var got []FD
	rest := parseRecords(in, func(f FD) { got = append(got, f) })
	want := []FD{{Inode: 7, PID: 100, FD: 3, Family: 2, Type: 1, Protocol: 6, State: TCPClose}, {Inode: 8, PID: 100, FD: 4, Family: 1, Type: 1, State: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if len(rest) != 10 {
		t.Errorf("rest %d bytes, want the 10 of the cut record", len(rest))
	}
	if !got[0].IsTCP() || got[1].IsTCP() || got[0].IPv6() {
		t.Errorf("IsTCP/IPv6 wrong: %+v", got)
	}
	if !got[0].HeldClose() || got[1].HeldClose() {
		t.Errorf("HeldClose wrong: %+v", got)
	}
}
