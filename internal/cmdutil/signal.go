package cmdutil

import (
	"context"
	"os/signal"
	"syscall"
)

// InterruptContext returns a context cancelled by Ctrl-C (SIGINT) or
// SIGTERM, the two ways a terminal user and a process supervisor stop a
// long-running command; stop releases the signals.
func InterruptContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
}
