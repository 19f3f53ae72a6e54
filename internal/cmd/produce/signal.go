package produce

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// releaseOnSIGUSR1 returns a channel closed when the process first gets
// SIGUSR1 (--block-callbacks); stop releases the signal.
func releaseOnSIGUSR1() (release <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-sig:
			close(ch)
		case <-done:
		}
	}()
	return ch, func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
		})
	}
}
