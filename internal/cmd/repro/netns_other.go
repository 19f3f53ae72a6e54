//go:build !linux

package repro

import (
	"context"
	"errors"
	"time"
)

// netnsSupported says why --netns cannot run here: network namespaces are
// Linux's.
func netnsSupported() string {
	return "--netns needs Linux: network namespaces are Linux's"
}

func runInNetNS(context.Context, *ReproOptions) error {
	return errors.New("repro: --netns needs Linux")
}

func setupNetNS(time.Duration) error { return errors.New("repro: --netns needs Linux") }
