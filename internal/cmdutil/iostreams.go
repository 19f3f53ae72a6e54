// Package cmdutil holds what every kdiag command shares: the I/O streams, the
// factory of dependencies, typed exit codes and output-format helpers.
package cmdutil

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are the streams a command reads and writes. Nothing below main
// writes to os.Stdout directly, so tests run commands against buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// outTTY says whether Out is a terminal: live, redrawn output is only
	// drawn on a terminal; elsewhere commands print plain lines.
	outTTY bool
	// outFd is Out's file descriptor when it is a terminal, for its width.
	outFd int
}

// System returns the process's standard streams.
func System() *IOStreams {
	return &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		outTTY: term.IsTerminal(int(os.Stdout.Fd())),
		outFd:  int(os.Stdout.Fd()),
	}
}

// Test returns streams backed by buffers, for tests: stdin, stdout, stderr.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// TerminalWidth returns the width in columns of the terminal standard
// output is, 0 when it is not a terminal or its size cannot be read.
func (s *IOStreams) TerminalWidth() int {
	if !s.outTTY {
		return 0
	}
	w, _, err := term.GetSize(s.outFd)
	if err != nil {
		return 0
	}
	return w
}

// SetStdoutTTY overrides terminal detection (tests, --no-tty style flags).
func (s *IOStreams) SetStdoutTTY(v bool) { s.outTTY = v }
