package config

import (
	"fmt"
	"strings"
)

// binaryWindow is how much of an input is looked at for a NUL byte: the
// first 8000 bytes, as git's buffer_is_binary and GNU grep do. No text
// configuration holds a NUL; every executable, archive and image does,
// within its first bytes.
const binaryWindow = 8000

// BinaryError is the error for an input that is not text: a NUL byte in
// its first bytes. Linting it as properties would turn every run of bytes
// between newlines into a key (a copied kdiag binary gave 238,229
// findings), none of which means anything.
type BinaryError struct {
	// Offset is the first NUL byte's.
	Offset int
	// UTF16 says the input starts with a UTF-16 byte order mark: text,
	// but in an encoding neither the Java client nor librdkafka reads.
	UTF16 bool
}

func (e *BinaryError) Error() string {
	if e.UTF16 {
		return "UTF-16 text, not a configuration the clients read: save it as UTF-8 (or ISO-8859-1 with \\u escapes)"
	}
	return fmt.Sprintf("binary file, not a configuration (a NUL byte at offset %d)", e.Offset)
}

// CheckText returns a *BinaryError for an input that is not text (see
// BinaryError), nil otherwise.
func CheckText(src string) error {
	head := src[:min(len(src), binaryWindow)]
	i := strings.IndexByte(head, 0)
	if i < 0 {
		return nil
	}
	utf16 := strings.HasPrefix(src, "\xff\xfe") || strings.HasPrefix(src, "\xfe\xff")
	return &BinaryError{Offset: i, UTF16: utf16}
}
