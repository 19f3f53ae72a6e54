//go:build !linux

package netstat

import "errors"

// getdents: process attribution reads Linux's /proc/<pid>/fd, which other
// systems do not have. Elsewhere every process reads as failed, so that the
// rest of kdiag (lint, repro, broker, report) builds and runs there.
func getdents(int, []byte) (int, error) {
	return 0, errors.New("reading /proc/<pid>/fd needs Linux")
}
