// Package fdcheck stops kdiag, with exit status 3 (UNKNOWN) and a message
// naming `ulimit -n`, when the open-file limit leaves too few descriptors for
// the Go runtime, before anything asks for one.
//
// The runtime takes descriptors for its poller (on Linux two: epoll and an
// eventfd) the first time a file or socket is opened, and when it cannot
// get them it dies with "fatal error: runtime: netpollinit failed", exit
// status 2: CRITICAL to Nagios, for kdiag's own failure (issue 30: `ulimit -n
// 6`). A fatal error cannot be recovered, so the limit is checked before the
// first open. That happens in package initialisation (gopsutil's cpu package
// reads /proc/stat in its init), so the check is this package's init: the Go
// spec (since 1.21) initialises, at each step, the first package by import
// path whose imports are all initialised. This package imports only syscall,
// which every package that can open a file imports too (through
// internal/poll, os or net), and its path sorts before theirs
// ("github.com/..." < "internal/...", "net", "os"): it runs before any of
// them can open a file. Importing anything more (fmt, os) would lose that.
//
// Go raises the soft limit to just below the hard one itself (package
// syscall's init, before this one: Cur = Max-1), so only a hard limit this
// low gets here.
package fdcheck

// Need is the number of descriptors that must be free under the limit when
// kdiag starts: the first file the process opens, and the runtime's two for
// its poller, which it makes at that first open.
const Need = 3

// exitUnknown is cmdutil.ExitUnknown (the test checks it), the exit status
// of a check that could not run; cmdutil imports more than syscall.
const exitUnknown = 3
