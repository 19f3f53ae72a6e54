// Package record writes and reads `kdiag watch --record` files: one
// netstat.Snapshot per line, as JSON (JSON Lines).
//
// Each line is written with a single write(2) of the whole line to a file
// opened with O_APPEND, so concurrent appenders never interleave and a kill
// -9 can at worst cut the last line short (the kernel stops a regular-file
// write at a page boundary on a fatal signal). Read reports such a line as a
// note and skips it; Open starts a new line when the file ends without one,
// so a cut line never swallows the next snapshot.
//
// Read holds one line at a time, at most MaxLine bytes of it, and stops at
// the first line when the input does not begin as a recording does
// (ErrNotRecording): a binary file or /dev/zero is said to be one in its
// first bytes, not read whole.
package record

import (
	"github.com/kdiag/kdiag/internal/redact"

	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/kdiag/kdiag/netstat"
)

// Writer appends snapshots to a recording.
type Writer struct {
	f   *os.File
	buf bytes.Buffer
}

// Open opens path for appending, creating it (mode 0600 less the umask) if
// needed. A recording that exists is narrowed to its owner's bits (0644
// becomes 0600) before anything is appended.
func Open(path string) (*Writer, error) {
	// 0600: a recording holds every process's command line and endpoints.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := ownerOnly(f, path); err != nil {
		f.Close()
		return nil, err
	}
	w := &Writer{f: f}
	if err := w.terminateCutLine(path); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// ownerOnly takes group and others' bits off a recording that has them (one
// an older kdiag left 0644): what is appended must not be readable to all.
// Anything but a regular file (/dev/stdout, a FIFO) is left alone.
func ownerOnly(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if m := st.Mode(); m.IsRegular() && m.Perm()&0o077 != 0 {
		if err := f.Chmod(m.Perm() & 0o700); err != nil {
			return fmt.Errorf("record: %s is mode %04o, readable beyond its owner, and cannot be made %04o: %w", path, m.Perm(), m.Perm()&0o700, err)
		}
	}
	return nil
}

// terminateCutLine writes "\n" when the file's last byte is not one: the
// previous writer was killed mid-line.
func (w *Writer) terminateCutLine(path string) error {
	r, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, st.Size()-1); err != nil {
		return fmt.Errorf("record: %s: %w", path, err)
	}
	if last[0] != '\n' {
		if _, err := w.f.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("record: %s: %w", path, err)
		}
	}
	return nil
}

// Write appends one snapshot as one line, in one write(2).
func (w *Writer) Write(s *netstat.Snapshot) error {
	w.buf.Reset()
	if err := json.NewEncoder(&w.buf).Encode(s); err != nil { // Encode ends with '\n'
		return fmt.Errorf("record: %w", err)
	}
	// os.File.Write issues one write(2) for the whole buffer; it loops only
	// on a short write, which for a regular file means the disk is full or
	// the process is being killed.
	if _, err := w.f.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Note is a line Read skipped, and why.
type Note struct {
	Line int
	Text string
}

func (n Note) String() string {
	if n.Line == 0 {
		return n.Text // about the whole recording
	}
	return fmt.Sprintf("line %d: %s", n.Line, n.Text)
}

// ErrEmpty is returned by Read when the recording holds no snapshot.
var ErrEmpty = errors.New("no snapshot in the recording")

// ErrNotRecording is returned by Read when the input's first line does not
// begin as every line kdiag watch --record writes does.
var ErrNotRecording = errors.New("not a recording")

// snapshotPrefix is how every line watch writes begins: encoding/json
// writes netstat.Snapshot's fields in their order, and Time has been the
// first since recordings began.
const snapshotPrefix = `{"time":`

// MaxLine bounds the bytes of one line that Read holds; a longer line is
// skipped with a note, read through without being kept. watch writes a
// line a scan: about 190 bytes a socket (report/testdata/leak.jsonl: 4,472
// sockets in 76 lines, 189 bytes each), at most 416 for a socket whose
// every field is at its longest (TestLongestSocketRecord), plus its
// processes. At 200,000 sockets, the largest host kdiag is measured on
// (BENCHMARKS.md, the cost curve), that is 38 MB as watch writes it and
// 83 MB at the longest; 256 MiB leaves three times that for the
// processes' command lines and larger hosts. Before the bound, kdiag report
// held each line whole: a 1 GiB line took 2.1 GB, and /dev/zero 6.9 GB in
// 30 s.
const MaxLine = 256 << 20

// maxLine is MaxLine; tests lower it.
var maxLine = MaxLine

// Read reads every snapshot of a recording. A line that is not a whole
// snapshot (the last one cut by a kill, a corrupt one, one longer than
// MaxLine) is skipped with a note saying where; an input whose first line
// does not begin as a snapshot is ErrNotRecording, said from its first
// bytes; an I/O error is an error.
func Read(r io.Reader) ([]netstat.Snapshot, []Note, error) {
	var (
		snaps []netstat.Snapshot
		notes []Note
	)
	lr := &lineReader{br: bufio.NewReaderSize(r, chunkSize), max: maxLine}
	first := true // no line but blank ones yet
	for n := 1; ; n++ {
		l, err := lr.next(first)
		if l.notRecording {
			return nil, nil, fmt.Errorf("%w: line %d begins %q, where a kdiag watch --record file is JSON lines that begin %s", ErrNotRecording, n, l.head, snapshotPrefix)
		}
		if len(l.text) > 0 || l.tooLong {
			first = false
			if note, ok := parseLine(l, &snaps); !ok {
				notes = append(notes, Note{n, note})
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return snaps, notes, fmt.Errorf("record: line %d: %w", n, err)
		}
	}
	return snaps, notes, nil
}

// parseLine appends l's snapshot to snaps, or says why it is skipped.
func parseLine(l line, snaps *[]netstat.Snapshot) (note string, ok bool) {
	if l.tooLong {
		return fmt.Sprintf("longer than %d MiB, more than kdiag watch writes (MaxLine); skipped", maxLine>>20), false
	}
	var s netstat.Snapshot
	switch jerr := json.Unmarshal(l.text, &s); {
	case jerr != nil && !l.complete && bytes.HasPrefix(l.text, []byte(snapshotPrefix)):
		return fmt.Sprintf("cut short after %d bytes (the writer was stopped mid-line); skipped", len(l.text)), false
	case jerr != nil:
		return fmt.Sprintf("not a snapshot (%v); skipped", jerr), false
	case s.Time.IsZero():
		return "snapshot without a time; skipped", false
	}
	// Recordings written before kdiag masked command lines hold them in clear.
	for i := range s.Processes {
		s.Processes[i].Cmdline = redact.Line(s.Processes[i].Cmdline)
	}
	*snaps = append(*snaps, s)
	return "", true
}

// lineReader reads a recording a line at a time, holding at most max bytes
// of one. bufio.Reader's ReadBytes and Scanner hold a line whole (or fail
// on it): this keeps reading past the bound without keeping what it reads.
// A line is kept in chunks of chunkSize as read, not in one slice grown by
// append, whose copies left a line of 256 MiB costing 775 MB resident.
type lineReader struct {
	br  *bufio.Reader
	max int
	// chunks hold the line read so far, n bytes; their memory serves the
	// next line too.
	chunks [][]byte
	n      int
	// joined is the line in one piece, for json.Unmarshal, when it took
	// more than one chunk.
	joined []byte
}

// chunkSize is the size of lineReader's chunks, and of its bufio.Reader.
const chunkSize = 1 << 20

// line is what lineReader.next read of one line.
type line struct {
	// text is the line, blanks trimmed, unless it was too long.
	text []byte
	// complete: it ended with a newline, not at the end of the input.
	complete bool
	// tooLong: it was longer than max; text is empty.
	tooLong bool
	// notRecording: next was asked to check the line's start, and it does
	// not begin as a snapshot; head is its first bytes, and the rest of
	// the line is not read (on /dev/zero it has no end).
	notRecording bool
	head         string
}

// keep appends b to the line's chunks.
func (r *lineReader) keep(b []byte) {
	for len(b) > 0 {
		i := r.n / chunkSize
		if i == len(r.chunks) {
			r.chunks = append(r.chunks, make([]byte, 0, chunkSize))
		}
		c := r.chunks[i]
		k := copy(c[len(c):cap(c)], b)
		r.chunks[i] = c[:len(c)+k]
		r.n += k
		b = b[k:]
	}
}

// reset empties the chunks for the next line; after a line too long to
// keep it lets all but one go, as it would have had to hold max bytes.
func (r *lineReader) reset(release bool) {
	if release && len(r.chunks) > 1 {
		r.chunks, r.joined = r.chunks[:1], nil
	}
	for i := range r.chunks {
		r.chunks[i] = r.chunks[i][:0]
	}
	r.n = 0
}

// bytes returns the line read so far in one piece.
func (r *lineReader) bytes() []byte {
	switch {
	case r.n == 0:
		return nil
	case r.n <= chunkSize:
		return r.chunks[0]
	}
	r.joined = r.joined[:0]
	for _, c := range r.chunks {
		r.joined = append(r.joined, c...)
	}
	return r.joined
}

// next reads the next line. With checkStart, it stops as soon as the line's
// first bytes past any blanks show that it does not begin with
// snapshotPrefix. Its error is nil, io.EOF at the end of the input, or a
// read error.
func (r *lineReader) next(checkStart bool) (line, error) {
	var l line
	r.reset(false)
	err := bufio.ErrBufferFull
	var head []byte // the line's first bytes past blanks, up to 16
	for errors.Is(err, bufio.ErrBufferFull) {
		var chunk []byte
		chunk, err = r.br.ReadSlice('\n')
		if checkStart {
			h := chunk
			if len(head) == 0 {
				h = bytes.TrimLeft(h, " \t\r\n")
			}
			head = append(head, h[:min(len(h), 16-len(head))]...)
			ended := !errors.Is(err, bufio.ErrBufferFull)
			if len(head) >= len(snapshotPrefix) || ended && len(head) > 0 {
				checkStart = false
				// A cut first line may be shorter than the prefix.
				if !bytes.HasPrefix(head, []byte(snapshotPrefix)) && !(ended && bytes.HasPrefix([]byte(snapshotPrefix), head)) {
					l.notRecording, l.head = true, string(head)
					return l, nil
				}
			}
		}
		if !l.tooLong && r.n+len(chunk) > r.max {
			l.tooLong = true
			r.reset(true)
		}
		if !l.tooLong {
			r.keep(chunk)
		}
	}
	l.complete = err == nil
	if !l.tooLong {
		l.text = bytes.TrimSpace(r.bytes())
	}
	return l, err
}

// ReadFile reads the recording at path.
func ReadFile(path string) ([]netstat.Snapshot, []Note, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		// Not "line 1: read ...: is a directory".
		return nil, nil, fmt.Errorf("record: %s is a directory, not a recording: give the file kdiag watch --record wrote", path)
	}
	snaps, notes, err := Read(f)
	if errors.Is(err, ErrNotRecording) {
		return nil, nil, fmt.Errorf("record: %s: %w", path, err)
	}
	if err == nil && len(snaps) == 0 {
		// Say why, with the first lines' reasons: "no snapshot" alone
		// leaves the user to guess (a file of another format, all cut).
		var why []string
		for i, n := range notes {
			if i == 3 {
				why = append(why, fmt.Sprintf("and %d more lines", len(notes)-i))
				break
			}
			why = append(why, n.String())
		}
		if len(why) > 0 {
			err = fmt.Errorf("record: %s: %w: %s", path, ErrEmpty, strings.Join(why, "; "))
		} else {
			err = fmt.Errorf("record: %s: %w (the file is empty)", path, ErrEmpty)
		}
	}
	return snaps, notes, err
}

// SortByTime puts snaps in time order, those of equal time in file order,
// and returns how many were out of order (a later snapshot before an
// earlier one): a recording appended to by two watches at once, or pieced
// together. The analyzer takes snapshots in time order only.
func SortByTime(snaps []netstat.Snapshot) int {
	late := 0
	for i := 1; i < len(snaps); i++ {
		if snaps[i].Time.Before(snaps[i-1].Time) {
			late++
		}
	}
	if late > 0 {
		slices.SortStableFunc(snaps, func(a, b netstat.Snapshot) int { return a.Time.Compare(b.Time) })
	}
	return late
}
