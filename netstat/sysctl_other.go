//go:build !linux

package netstat

import (
	"fmt"
	"os"
)

// openInNetNS needs Linux's setns(2).
func openInNetNS(nsPath string, paths []string) ([]*os.File, error) {
	return nil, fmt.Errorf("netstat: %w: %s: not Linux", ErrNetNSUnavailable, nsPath)
}
