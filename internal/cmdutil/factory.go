package cmdutil

import "time"

// Factory carries the dependencies commands are built from, so that a test can
// swap any of them (gh's cmdutil.Factory pattern).
type Factory struct {
	IO *IOStreams
	// Now is the clock; tests fix it.
	Now func() time.Time
	// ProcRoot is the root of the proc filesystem, "/proc" unless a test or
	// the hidden --proc-root flag points at a fixture tree.
	ProcRoot string
	// Executable is the path of the running kdiag binary, used to start
	// child processes (the reference producer in kdiag repro).
	Executable string
}

// NewFactory returns the factory for a real run.
func NewFactory(io *IOStreams, executable string) *Factory {
	return &Factory{IO: io, Now: time.Now, ProcRoot: "/proc", Executable: executable}
}
