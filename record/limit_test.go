package record

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/netstat"
)

// repeat reads n bytes of b, over and over (n < 0: without end).
type repeat struct {
	b byte
	n int64
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	if r.n > 0 && int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = r.b
	}
	if r.n > 0 {
		r.n -= int64(len(p))
	}
	return len(p), nil
}

const good = `{"time":"2026-12-02T10:00:00Z","source":"netlink","sockets":[],"processes":[]}` + "\n"

// TestNotARecording: what is not a recording is said to be one from its
// first bytes, without reading it whole: garbage with no newline is not
// "cut short", and /dev/zero (no newline, no end) is not held until the
// memory runs out (6.9 GB in 30 s before).
func TestNotARecording(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   io.Reader
		head string
	}{
		{"text without a newline", strings.NewReader("hello, this is not json"), `"hello, this is n"`},
		{"zeros without end", &repeat{0, -1}, `"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"`},
		{"a zip", strings.NewReader("PK\x03\x04\x14\x00\x00\x00\x08\x00"), `"PK\x03\x04\x14\x00\x00\x00\b\x00"`},
		{"JSON, but not a snapshot", strings.NewReader("\n\n{\"kind\":\"DaemonSet\"}\n" + good), `"{\"kind\":\"DaemonS"`},
	} {
		snaps, notes, err := Read(tc.in)
		if !errors.Is(err, ErrNotRecording) || !strings.Contains(err.Error(), "begins "+tc.head) || len(snaps) != 0 {
			t.Errorf("%s: %d snapshots, notes %v, err %v; want ErrNotRecording saying it begins %s", tc.name, len(snaps), notes, err, tc.head)
		}
	}
	_, _, err := ReadFile("/dev/zero")
	if !errors.Is(err, ErrNotRecording) || !strings.HasPrefix(err.Error(), `record: /dev/zero: not a recording: line 1 begins "\x00`) {
		t.Errorf("/dev/zero: %v", err)
	}
}

// TestGarbageAfterSnapshots: a last line without a newline is "cut short"
// only when it began as a snapshot; other garbage is not a snapshot.
func TestGarbageAfterSnapshots(t *testing.T) {
	for _, tc := range []struct{ last, want string }{
		{`{"time":"2026-12-02T10:00:01Z","sock`, "line 2: cut short after 36 bytes (the writer was stopped mid-line); skipped"},
		{"\x00\x00\x00garbage", "line 2: not a snapshot (invalid character '\\x00' looking for beginning of value); skipped"},
	} {
		snaps, notes, err := Read(strings.NewReader(good + tc.last))
		if err != nil || len(snaps) != 1 || len(notes) != 1 || notes[0].String() != tc.want {
			t.Errorf("%q: %d snapshots, notes %v, err %v; want 1 and %q", tc.last, len(snaps), notes, err, tc.want)
		}
	}
}

// TestLongLineBounded: a line longer than the bound (1 MiB here, MaxLine
// in kdiag) is skipped with a note, read through without being held: the
// 64 MiB line costs Read less than 8 MiB, and the snapshot after it is
// read.
func TestLongLineBounded(t *testing.T) {
	defer func(m int) { maxLine = m }(maxLine)
	maxLine = 1 << 20
	in := io.MultiReader(strings.NewReader(good+`{"time":"`), &repeat{'x', 64 << 20}, strings.NewReader("\n"+good))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	snaps, notes, err := Read(in)
	runtime.ReadMemStats(&after)
	if err != nil || len(snaps) != 2 {
		t.Fatalf("%d snapshots, err %v; want the 2 around the long line", len(snaps), err)
	}
	if want := "line 2: longer than 1 MiB, more than kdiag watch writes (MaxLine); skipped"; len(notes) != 1 || notes[0].String() != want {
		t.Errorf("notes %v, want %q", notes, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("reading a 64 MiB line allocated %.1f MiB; it should hold at most the 1 MiB bound and a buffer", float64(alloc)/(1<<20))
	}
}

// TestLongestSocketRecord: MaxLine rests on a socket's record taking at
// most 416 bytes as watch writes it; this is one with every field at its
// longest.
func TestLongestSocketRecord(t *testing.T) {
	s := netstat.Socket{Family: netstat.IPv6, State: netstat.NewSynRecv, IdleMS: math.MaxUint32,
		Local:  netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"),
		Remote: netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"),
		RecvQ:  math.MaxUint32, SendQ: math.MaxUint32, Inode: math.MaxUint64, UID: math.MaxUint32, NetNS: math.MaxUint64,
		PID: math.MinInt64, FD: math.MinInt64, HasAge: true, Age: math.MinInt64, AgeSpan: math.MaxUint32}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 416 {
		t.Errorf("a socket's longest record is %d bytes, above the 416 MaxLine's comment counts on: %s", len(b), b)
	}
}

// TestReadDirectory: a directory is said to be one, not "line 1: read".
func TestReadDirectory(t *testing.T) {
	dir := t.TempDir()
	_, _, err := ReadFile(dir)
	if err == nil || !strings.Contains(err.Error(), dir+" is a directory, not a recording") || strings.Contains(err.Error(), "line 1") {
		t.Errorf("ReadFile(dir) = %v", err)
	}
}
