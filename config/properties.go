package config

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseProperties parses name's content in the syntax of Java's
// java.util.Properties.load (also the syntax of librdkafka's property files,
// which follow it) into one Entry per key/value line, in file order. Key and
// RawKey are the unescaped key.
//
// The rules are those of Properties.load (JDK 17, Properties.LineReader and
// load0):
//   - A logical line is a natural line plus its continuations: a line that
//     ends in an odd number of backslashes continues on the next one, whose
//     leading blanks (space, tab, form feed) are dropped. A line ends at \n,
//     \r or \r\n.
//   - A natural line whose first non-blank character is # or ! is a comment;
//     it is kept in File.Comments (Text is what follows the marker, with the
//     surrounding blanks trimmed) so that suppressions such as
//     "# kdiag:ignore KD101 reason" can be read. There are no trailing
//     comments: "a=b # c" sets a to "b # c". (The lint testdata convention
//     "key=value  # want KD101" therefore leaves the "# want" text in the
//     value; the rules tests strip it themselves.)
//   - The key runs to the first unescaped '=', ':' or blank; blanks around
//     the separator are skipped, and the value is the rest of the line.
//   - Escapes, in keys and values alike: \uXXXX, \t \n \r \f, and \x -> x
//     for any other x ("a\=b=c" has key "a=b").
//
// The bytes are read as the Java client reads them. Kafka's
// Utils.loadProps (the --producer.config of the command-line tools) and
// most applications call Properties.load(InputStream), which reads
// ISO-8859-1: every byte is one character, so client.id=caf\xE9 is
// "café". A file that is valid UTF-8 is read as UTF-8 instead, as
// Properties.load(Reader) with a UTF-8 reader reads it and as an editor
// shows it, so that non-ASCII text in messages and columns in positions are
// what the user sees (the Java client itself would see each non-ASCII
// character of such a file as two or three ISO-8859-1 characters; no check
// of kdiag depends on non-ASCII text). A leading UTF-8 byte order mark is
// kept as part of the first key, as Java keeps it, and reported as a
// Problem, because Java would not recognise that key.
//
// Where Java would throw (a malformed \uXXXX escape) or the input is not
// what it should be (a lone UTF-16 surrogate, a file that ends in a line
// continuation), ParseProperties records a Problem and goes on: a malformed
// escape is kept as written. The error is only for a reader that fails.
//
// Positions are 1-based lines and columns counted in characters (runes;
// bytes in an ISO-8859-1 file); KeyPos and ValuePos point at the first
// character of the key and value as written (for a value that starts on a
// continuation line, on that line). An empty value's ValuePos is just past
// the end of its logical line.
//
// The input is read in one pass without decoding it whole: memory beyond
// the entries is one logical line's characters.
func ParseProperties(name string, r io.Reader) (*File, error) {
	// Read into a strings.Builder, whose String does not copy: keys and
	// values written without escapes are then substrings of it, and a
	// large file is held once, not once as bytes and again as strings.
	var b strings.Builder
	if _, err := io.Copy(&b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := &File{Path: name, Dialect: Java}
	parsePropertiesInto(f, b.String())
	return f, nil
}

// propLine is one logical line: its characters with where each was written.
type propLine struct {
	text []rune
	pos  []Pos
	// off is each character's byte offset in the input.
	off   []int32
	start Pos // where the logical line starts (for an empty line: its backslash)
	end   Pos // just past its last character
}

// propReader turns the input into logical lines, as Properties.LineReader.
type propReader struct {
	f    *File
	data string
	// latin1 says the input is not valid UTF-8 and is read as ISO-8859-1.
	latin1 bool
	// i is the offset of the next character, at line:col.
	i         int
	line, col int
	// text and tpos back every propLine; readLine reuses them, so a line
	// is valid until the next call.
	text []rune
	tpos []Pos
	toff []int32
	// comment is the scratch buffer of a comment's text.
	comment []rune
}

func newPropReader(f *File, data string) *propReader {
	pr := &propReader{f: f, data: data, latin1: !utf8.ValidString(data), line: 1, col: 1}
	if strings.HasPrefix(data, "\uFEFF") {
		// The client reads on (a warning): the first line's key, or a
		// comment, becomes a key that starts with U+FEFF.
		f.Problems = append(f.Problems, Problem{Pos: posAt(1, 1), Warning: true,
			Msg: "file starts with a UTF-8 byte order mark, which Java's Properties.load keeps as part of the first key: save the file without BOM"})
	}
	return pr
}

// parsePropertiesInto appends data's entries, comments and problems to f.
// Keys and values may be substrings of data.
func parsePropertiesInto(f *File, data string) {
	pr := newPropReader(f, data)
	if f.Entries == nil {
		// Sized once, so that the slice is not copied as it grows: a
		// large file's entries are most of its memory.
		f.Entries = make([]Entry, 0, countLogicalLines(data))
	}
	for {
		ln, ok := pr.readLine()
		if !ok {
			return
		}
		f.Entries = append(f.Entries, pr.entry(ln))
	}
}

// countLogicalLines counts, in one quick pass over the bytes, the lines
// that may start an entry: not blank, not a comment, not the continuation
// of a line ending in an odd number of backslashes. It is exact but for
// the corners readLine handles (a comment marker after a line that is only
// a backslash), where it may count one more: the capacity of Entries.
func countLogicalLines(data string) int {
	n := 0
	cont := false
	for len(data) > 0 {
		end := strings.IndexAny(data, "\r\n")
		line := data
		if end >= 0 {
			line = data[:end]
			data = data[end+1:]
		} else {
			data = ""
		}
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
			i++
		}
		if !cont && i < len(line) && line[i] != '#' && line[i] != '!' {
			n++
		}
		if cont && i == len(line) {
			// A blank line ends a continuation.
			cont = false
			continue
		}
		if !cont && (i == len(line) || line[i] == '#' || line[i] == '!') {
			continue
		}
		bs := 0
		for j := len(line) - 1; j >= 0 && line[j] == '\\'; j-- {
			bs++
		}
		cont = bs%2 == 1
	}
	return n + 1
}

// eof reports whether every character has been read.
func (pr *propReader) eof() bool { return pr.i >= len(pr.data) }

// peek returns the next character without reading it.
func (pr *propReader) peek() rune {
	if pr.latin1 {
		return rune(pr.data[pr.i])
	}
	if c := pr.data[pr.i]; c < utf8.RuneSelf {
		return rune(c)
	}
	c, _ := utf8.DecodeRuneInString(pr.data[pr.i:])
	return c
}

// next reads one character and where it was written. A line ends after \n,
// and after \r unless \n follows (the \r of \r\n takes a column; the \n
// then ends the line).
func (pr *propReader) next() (rune, Pos, int32) {
	var c rune
	size := 1
	switch b := pr.data[pr.i]; {
	case pr.latin1 || b < utf8.RuneSelf:
		c = rune(b)
	default:
		c, size = utf8.DecodeRuneInString(pr.data[pr.i:])
	}
	p := posAt(pr.line, pr.col)
	off := int32(pr.i)
	pr.i += size
	if c == '\n' || (c == '\r' && (pr.i >= len(pr.data) || pr.data[pr.i] != '\n')) {
		pr.line, pr.col = pr.line+1, 1
	} else {
		pr.col++
	}
	return c, p, off
}

func isBlank(c rune) bool { return c == ' ' || c == '\t' || c == '\f' }

// readLine returns the next logical line, false at the end of input. It
// follows LineReader.readLine step by step, including its corner cases: a
// line that is only a backslash continues into the next natural line as if
// that started a new logical line (so a # there starts a comment), and a
// backslash alone at the end of input makes an empty line, which Java loads
// as the key "" with the value "".
func (pr *propReader) readLine() (propLine, bool) {
	ln := propLine{text: pr.text[:0], pos: pr.tpos[:0], off: pr.toff[:0]}
	defer func() { pr.text, pr.tpos, pr.toff = ln.text, ln.pos, ln.off }()
	skipBlank := true
	appendedLineBegin := false
	precedingBackslash := false
	started := false
	contAtEOF := func() {
		// Java's LineReader drops the backslash and reads the line
		// as if it were not there: no error, but a cut file ends so.
		pr.f.Problems = append(pr.f.Problems, Problem{Pos: ln.pos[len(ln.pos)-1], Warning: true,
			Msg: "line continuation (\\) at end of file: java.util.Properties drops it and reads the line without it; the file may be truncated"})
		ln.text, ln.pos, ln.off = ln.text[:len(ln.text)-1], ln.pos[:len(ln.pos)-1], ln.off[:len(ln.off)-1]
	}
	finish := func() propLine {
		if len(ln.pos) > 0 {
			last := ln.pos[len(ln.pos)-1]
			ln.end = Pos{Line: last.Line, Col: last.Col + 1}
		} else {
			ln.end = ln.start
		}
		return ln
	}
	for {
		if pr.eof() {
			if len(ln.text) == 0 {
				return ln, false
			}
			if precedingBackslash {
				contAtEOF()
			}
			return finish(), true
		}
		c, p, off := pr.next()
		if skipBlank {
			if isBlank(c) {
				continue
			}
			if !appendedLineBegin && (c == '\r' || c == '\n') {
				continue
			}
			skipBlank, appendedLineBegin = false, false
		}
		if len(ln.text) == 0 && (c == '#' || c == '!') {
			pr.comment = pr.comment[:0]
			for !pr.eof() {
				if d := pr.peek(); d == '\n' || d == '\r' {
					break
				}
				d, _, _ := pr.next()
				pr.comment = append(pr.comment, d)
			}
			pr.f.Comments = append(pr.f.Comments, Comment{
				Text: strings.Trim(string(pr.comment), " \t\f"), Pos: p})
			if !pr.eof() {
				pr.next() // the line terminator; a \n after \r is skipped as blank
			}
			skipBlank = true
			continue
		}
		if c != '\n' && c != '\r' {
			if !started {
				started, ln.start = true, p
			}
			ln.text = append(ln.text, c)
			ln.pos = append(ln.pos, p)
			ln.off = append(ln.off, off)
			precedingBackslash = c == '\\' && !precedingBackslash
			continue
		}
		// End of a natural line.
		if len(ln.text) == 0 {
			skipBlank = true
			continue
		}
		if pr.eof() {
			if precedingBackslash {
				contAtEOF()
			}
			return finish(), true
		}
		if !precedingBackslash {
			return finish(), true
		}
		// Continuation: drop the backslash and the next line's leading blanks.
		ln.text, ln.pos, ln.off = ln.text[:len(ln.text)-1], ln.pos[:len(ln.pos)-1], ln.off[:len(ln.off)-1]
		skipBlank, appendedLineBegin, precedingBackslash = true, true, false
		if c == '\r' && pr.peek() == '\n' {
			pr.next()
		}
	}
}

// entry splits a logical line into key and value, as Properties.load0.
func (pr *propReader) entry(ln propLine) Entry {
	limit := len(ln.text)
	keyLen, valueStart := splitLine(ln.text)
	key := pr.unescape(ln.text[:keyLen], ln.pos[:keyLen], ln.off[:keyLen])
	value := pr.unescape(ln.text[valueStart:], ln.pos[valueStart:], ln.off[valueStart:])
	e := Entry{Key: key, RawKey: key, Value: value, KeyPos: ln.start, ValuePos: ln.end}
	if limit > 0 {
		e.KeyPos = ln.pos[0]
	}
	if valueStart < limit {
		e.ValuePos = ln.pos[valueStart]
	}
	return e
}

// splitLine finds where the (escaped) key of a logical line ends and its
// value starts, as Properties.load0.
func splitLine(text []rune) (keyLen, valueStart int) {
	limit := len(text)
	valueStart = limit
	hasSep, backslash := false, false
	for keyLen < limit {
		c := text[keyLen]
		if (c == '=' || c == ':') && !backslash {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if isBlank(c) && !backslash {
			valueStart = keyLen + 1
			break
		}
		backslash = c == '\\' && !backslash
		keyLen++
	}
	for valueStart < limit {
		c := text[valueStart]
		if !isBlank(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	return keyLen, valueStart
}

// unescape decodes Properties escapes, as Properties.loadConvert. A \u
// escape is one UTF-16 code unit; a surrogate pair written as two escapes
// becomes its one character, a lone surrogate (which Go strings cannot hold)
// becomes U+FFFD with a Problem.
func (pr *propReader) unescape(s []rune, pos []Pos, off []int32) string {
	if !containsRune(s, '\\') {
		if len(s) > 0 && !pr.latin1 && pos[0].Line == pos[len(s)-1].Line {
			// Written as it reads, on one line: the input's own text.
			return pr.data[off[0] : int(off[len(s)-1])+utf8.RuneLen(s[len(s)-1])]
		}
		return string(s)
	}
	var b strings.Builder
	var high rune // pending high surrogate from a \u escape
	var highPos Pos
	flushHigh := func() {
		if high != 0 {
			pr.f.Problems = append(pr.f.Problems, Problem{Pos: highPos,
				Msg: "a \\u escape here is half of a UTF-16 surrogate pair without its other half (read as U+FFFD)"})
			b.WriteRune(utf8.RuneError)
			high = 0
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			// A final lone backslash cannot happen in a value (readLine
			// drops it) nor in a key (it would escape the separator).
			flushHigh()
			b.WriteRune(c)
			continue
		}
		i++
		c = s[i]
		if c == 'u' {
			u, ok := hex4(s[i+1:])
			if !ok {
				flushHigh()
				pr.f.Problems = append(pr.f.Problems, Problem{Pos: pos[i-1],
					Msg: "malformed \\uxxxx escape (Java's Properties.load rejects the whole file): write four hex digits after \\u, or \\\\u for a literal backslash-u"})
				b.WriteString(`\u`)
				continue
			}
			i += 4
			switch {
			case utf16.IsSurrogate(u) && u < 0xDC00:
				flushHigh()
				high, highPos = u, pos[i-5]
			case utf16.IsSurrogate(u):
				if high != 0 {
					b.WriteRune(utf16.DecodeRune(high, u))
					high = 0
				} else {
					high, highPos = u, pos[i-5]
					flushHigh()
				}
			default:
				flushHigh()
				b.WriteRune(u)
			}
			continue
		}
		flushHigh()
		switch c {
		case 't':
			c = '\t'
		case 'r':
			c = '\r'
		case 'n':
			c = '\n'
		case 'f':
			c = '\f'
		}
		b.WriteRune(c)
	}
	flushHigh()
	return b.String()
}

// hex4 reads the four hex digits of a \uXXXX escape.
func hex4(s []rune) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var v rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

func containsRune(s []rune, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

// EscapeKey writes k so that ParseProperties reads it back as k: the
// escapes of Properties.store (separators, blanks, comment markers,
// backslashes and control characters), with non-ASCII left as UTF-8.
func EscapeKey(k string) string { return escapeProp(k, true) }

// EscapeValue writes v so that ParseProperties reads it back as v, as the
// value after a separator. Only a leading blank needs escaping in a value,
// but separators are escaped too, as Properties.store does.
func EscapeValue(v string) string { return escapeProp(v, false) }

func escapeProp(s string, key bool) string {
	var b strings.Builder
	for i, c := range s {
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\f':
			b.WriteString(`\f`)
		case '=', ':', '#', '!':
			b.WriteByte('\\')
			b.WriteRune(c)
		case ' ':
			if key || i == 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(' ')
		default:
			if c < 0x20 || c == 0x7f || c == '\uFEFF' {
				fmt.Fprintf(&b, `\u%04X`, c)
			} else {
				b.WriteRune(c)
			}
		}
	}
	return b.String()
}
