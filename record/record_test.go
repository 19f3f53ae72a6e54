package record

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/netstat"
)

func testSnap(i int) netstat.Snapshot {
	return netstat.Snapshot{
		Time:   time.Date(2026, 12, 2, 10, 0, i, 0, time.UTC),
		Source: "netlink",
		Sockets: []netstat.Socket{{
			Family: netstat.IPv4, State: netstat.CloseWait,
			Local: netip.MustParseAddrPort("127.0.0.1:40001"), Remote: netip.MustParseAddrPort("127.0.0.1:9092"),
			RecvQ: 1, Inode: uint64(100 + i), Age: time.Duration(i) * time.Second, HasAge: true, PID: 42, FD: 7,
		}},
		Processes: []netstat.Process{{PID: 42, Name: "app", StartTime: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), States: map[string]int{"CLOSE_WAIT": 1}}},
	}
}

func TestRoundTripAndCutLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []netstat.Snapshot
	for i := range 3 {
		s := testSnap(i)
		want = append(want, s)
		if err := w.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	// Cut the file in the middle of the third line, as a kill -9 would.
	b, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(b, []byte("\n"))
	cut := append(append([]byte{}, lines[0]...), lines[1]...)
	cut = append(cut, lines[2][:len(lines[2])/2]...)
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	got, notes, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:2], got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("snapshots (-want +got):\n%s", diff)
	}
	if len(notes) != 1 || notes[0].Line != 3 || !strings.Contains(notes[0].Text, "cut short") {
		t.Errorf("notes = %v", notes)
	}

	// Appending after the cut starts a new line, so the new snapshot survives.
	w, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := testSnap(9)
	if err := w.Write(&s); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, notes, err = ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[2].Time.Equal(s.Time) {
		t.Errorf("after append: %d snapshots, last %v", len(got), got[len(got)-1].Time)
	}
	if len(notes) != 1 || notes[0].Line != 3 || strings.Contains(notes[0].Text, "cut short") {
		// The cut line is now terminated: it reads as corrupt, not cut.
		t.Errorf("after append notes = %v", notes)
	}
}

func TestReadCorruptAndEmpty(t *testing.T) {
	in := "{\"time\":\"2026-12-02T10:00:00Z\",\"sockets\":[]}\nnot json\n\n{}\n"
	got, notes, err := Read(strings.NewReader(in))
	if err != nil || len(got) != 1 {
		t.Fatalf("got %d snapshots, err %v", len(got), err)
	}
	want := []Note{{2, "not a snapshot (invalid character 'o' in literal null (expecting 'u')); skipped"}, {4, "snapshot without a time; skipped"}}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	path := filepath.Join(t.TempDir(), "empty.jsonl")
	os.WriteFile(path, nil, 0o644)
	if _, _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Errorf("empty file: err = %v", err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte("{\"time\":\"2026-12-02T10:00:00Z\"}\n{\"ti"))
	f.Add([]byte("\n\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		snaps, _, err := Read(bytes.NewReader(b))
		if errors.Is(err, ErrNotRecording) {
			if len(snaps) > 0 {
				t.Fatal("snapshots from what is not a recording")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			if s.Time.IsZero() {
				t.Fatal("snapshot without time accepted")
			}
		}
	})
}

// TestReadMasksOldCommandLines reads a recording whose command lines were
// written in clear: the snapshots it returns, and so reports, mask them.
func TestReadMasksOldCommandLines(t *testing.T) {
	line := `{"time":"2026-12-02T10:00:00Z","source":"netlink","sockets":[],"processes":[{"pid":42,"name":"java","cmdline":"java -Dssl.truststore.password=Tru5t -jar app.jar --sasl.password Hunter2","states":{}}]}` + "\n"
	snaps, _, err := Read(strings.NewReader(line))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("Read = %d snapshots, %v; want 1", len(snaps), err)
	}
	got := snaps[0].Processes[0].Cmdline
	if want := "java -Dssl.truststore.password=****** -jar app.jar --sasl.password ******"; got != want {
		t.Errorf("cmdline = %q, want %q", got, want)
	}
}

// TestOpenNarrowsMode appends to a recording an older kdiag left 0644: it
// becomes 0600 before the snapshot goes in, and keeps what it held.
func TestOpenNarrowsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rec.jsonl")
	old := `{"time":"2026-12-02T10:00:00Z","source":"netlink","sockets":[],"processes":[]}` + "\n"
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&netstat.Snapshot{Time: time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC), Source: "netlink"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("recording mode %04o after Open, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(p)
	snaps, notes, err := Read(bytes.NewReader(b))
	if err != nil || len(snaps) != 2 || len(notes) != 0 {
		t.Errorf("Read = %d snapshots, notes %v, %v; want the old one and the new one", len(snaps), notes, err)
	}
}
