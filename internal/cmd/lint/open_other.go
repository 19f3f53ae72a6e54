//go:build !unix

package lint

import "os"

// openNonBlock opens name for reading; only unix has FIFOs that block an
// open, so elsewhere it is a plain open.
func openNonBlock(name string) (*os.File, error) { return os.Open(name) }
