package lint

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// errNotRegular is the error for an input that is neither a regular file nor
// a directory: reading a FIFO blocks until a writer comes, a device or a
// socket is not a configuration file.
type errNotRegular struct{ mode fs.FileMode }

func (e errNotRegular) Error() string {
	return fmt.Sprintf("is %s, not a regular file (give - to read standard input)", describeMode(e.mode))
}

// describeMode names a file type for errors: "a named pipe (FIFO)".
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file"
}

// readRegular reads a regular file whole, and refuses anything else without
// blocking on it: the file is opened non-blocking (openNonBlock), so that a
// FIFO put in its place after a Stat cannot hang the open, and checked with
// fstat on the open descriptor before a byte is read.
//
// The content comes back as a string read into a strings.Builder (whose
// String does not copy): config.ParseString keeps substrings of it as keys
// and values, so a large file is in memory once.
func readRegular(name string) (string, error) {
	f, err := openNonBlock(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", &fs.PathError{Op: "read", Path: name, Err: errNotRegular{st.Mode()}}
	}
	var b strings.Builder
	b.Grow(int(st.Size()) + 1)
	if _, err := io.Copy(&b, f); err != nil {
		return "", err
	}
	return b.String(), nil
}

// statInput tells what an argument is without opening it (which would block
// on a FIFO): a directory, a regular file (or a link to one), or an error.
func statInput(name string) (os.FileInfo, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: errNotRegular{st.Mode()}}
	}
	return st, nil
}
