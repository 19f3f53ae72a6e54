package cmdutil

import (
	"errors"
	"fmt"
)

// Exit codes, in one place. Each command documents which it uses.
const (
	// ExitOK: success; no finding at or above the threshold.
	ExitOK = 0
	// ExitFindings: lint found problems at or above --fail-on; scan/watch: a
	// WARNING threshold was crossed (the Nagios plugin convention).
	ExitFindings = 1
	// ExitWarning is the Nagios WARNING status (same value as ExitFindings).
	ExitWarning = 1
	// ExitUsage: bad flags or arguments, or unreadable input (lint); Nagios
	// CRITICAL for scan/watch with --crit.
	ExitUsage = 2
	// ExitCritical is the Nagios CRITICAL status.
	ExitCritical = 2
	// ExitUnknown is the Nagios UNKNOWN status: the check itself could not run.
	ExitUnknown = 3
)

// ExitError asks main to exit with Code. If Err is non-nil main prints it to
// stderr first; a nil Err means the command already said what it had to.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Exit returns an *ExitError with the given code and no message.
func Exit(code int) error { return &ExitError{Code: code} }

// UsageErrorf returns a usage error (exit 2) with a message for the user.
func UsageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by a command to a process exit code: nil is
// 0, an *ExitError carries its own, anything else is 1.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}
