package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// Accept's waits after an error that passes: as net/http's Server.Serve, 5 ms
// after the first, doubling up to 1 s.
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
)

// acceptRetryable says whether an accept error passes once the system has
// the resource back: file descriptors of the process (EMFILE) or the system
// (ENFILE), socket buffers or memory (ENOBUFS, ENOMEM), or a connection that
// the client aborted before it was accepted (ECONNABORTED, which Go's poller
// mostly retries itself). Any other error, the listener's close included,
// ends the accept loop.
func acceptRetryable(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// nextAcceptDelay doubles the last delay, from acceptDelayMin up to
// acceptDelayMax.
func nextAcceptDelay(last time.Duration) time.Duration {
	if last == 0 {
		return acceptDelayMin
	}
	return min(2*last, acceptDelayMax)
}

// acceptAdvice words an accept error that passes for the log: what happened
// and what to do.
func acceptAdvice(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		limit := "the process's open-file limit"
		if n := openFileLimit(); n > 0 {
			limit = fmt.Sprintf("the process's open-file limit, %d", n)
		}
		return fmt.Sprintf("accept failed: the broker has used %s; it retries, accepting again as connections close: raise the limit (ulimit -n) before starting it, or close idle connections sooner (--idle)", limit)
	case errors.Is(err, syscall.ENFILE):
		return "accept failed: the system is out of file descriptors; it retries, accepting again as files close: raise fs.file-max (sysctl) or close what holds them"
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return "accept failed: the kernel is short of memory for sockets; it retries, accepting again as memory frees"
	}
	return "accept failed; it retries"
}

// acceptWarnEvery is how often at most a listener warns that accepts fail:
// a broker kept near its open-file limit fails and recovers with every
// connection that closes, and one warning a minute says it.
const acceptWarnEvery = time.Minute

// acceptBackoff accepts the next connection, waiting out the errors that
// pass (acceptRetryable) as net/http does: kfake's own loop would stop for
// good. An episode of failures begins with the first failed accept and
// ends at the first accept that succeeds at once: one that succeeds only
// after waiting (a connection closed, and the next client took its file)
// does not end it. An episode's first failure is logged as a warning that
// says what to do, unless one was within acceptWarnEvery, and its end with
// how many accepts failed. It returns the listener's error when the error
// does not pass or the cluster is closing. kfake calls Accept from one
// goroutine per listener: the episode's fields need no lock.
func (l *listener) acceptBackoff() (net.Conn, error) {
	var delay time.Duration
	for {
		conn, err := l.Listener.Accept()
		if err == nil {
			if delay == 0 && l.acceptFailed > 0 {
				level := slog.LevelDebug
				if l.acceptWarned {
					level = slog.LevelInfo
				}
				l.c.log.Log(context.Background(), level, "accepting connections again", "node", l.node, "bind", l.Listener.Addr().String(),
					"failed_accepts", l.acceptFailed, "for", time.Since(l.acceptFailingSince).Round(time.Millisecond).String())
				l.acceptFailed = 0
			}
			return conn, nil
		}
		if !acceptRetryable(err) || l.c.closing.Load() {
			return nil, err
		}
		if l.acceptFailed == 0 {
			now := time.Now()
			l.acceptFailingSince = now
			l.acceptWarned = l.acceptLastWarning.IsZero() || now.Sub(l.acceptLastWarning) >= acceptWarnEvery
			if l.acceptWarned {
				l.acceptLastWarning = now
				l.c.log.Warn(acceptAdvice(err), "node", l.node, "bind", l.Listener.Addr().String(), "error", err.Error())
			}
		}
		l.acceptFailed++
		delay = nextAcceptDelay(delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.c.stop:
			t.Stop()
			return nil, err
		}
	}
}
