// Package record writes and reads `kdiag watch --record` files: one
// netstat.Snapshot per line, as JSON (JSON Lines).
//
// Each line is written with a single write(2) of the whole line to a file
// opened with O_APPEND, so concurrent appenders never interleave and a kill
// -9 can at worst cut the last line short (the kernel stops a regular-file
// write at a page boundary on a fatal signal). Read reports such a line as a
// note and skips it; Open starts a new line when the file ends without one,
// so a cut line never swallows the next snapshot.
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

// Open opens path for appending, creating it (mode 0644) if needed.
func Open(path string) (*Writer, error) {
	// 0600 (less the umask): a recording holds every process's command
	// line and endpoints. A file that exists keeps its mode.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	w := &Writer{f: f}
	if err := w.terminateCutLine(path); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
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

// Read reads every snapshot of a recording. A line that is not a whole
// snapshot (the last one cut by a kill, or a corrupt one) is skipped with a
// note saying where; only an I/O error is an error.
func Read(r io.Reader) ([]netstat.Snapshot, []Note, error) {
	var (
		snaps []netstat.Snapshot
		notes []Note
	)
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			complete := b[len(b)-1] == '\n'
			b = bytes.TrimSpace(b)
			if len(b) > 0 {
				var s netstat.Snapshot
				switch jerr := json.Unmarshal(b, &s); {
				case jerr != nil && !complete:
					notes = append(notes, Note{line, fmt.Sprintf("cut short after %d bytes (the writer was stopped mid-line); skipped", len(b))})
				case jerr != nil:
					notes = append(notes, Note{line, fmt.Sprintf("not a snapshot (%v); skipped", jerr)})
				case s.Time.IsZero():
					notes = append(notes, Note{line, "snapshot without a time; skipped"})
				default:
					// Recordings written before kdiag masked command lines hold them in clear.
					for i := range s.Processes {
						s.Processes[i].Cmdline = redact.Line(s.Processes[i].Cmdline)
					}
					snaps = append(snaps, s)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return snaps, notes, fmt.Errorf("record: line %d: %w", line, err)
		}
	}
	return snaps, notes, nil
}

// ReadFile reads the recording at path.
func ReadFile(path string) ([]netstat.Snapshot, []Note, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	snaps, notes, err := Read(f)
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
