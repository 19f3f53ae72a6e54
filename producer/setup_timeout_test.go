package producer

import (
	"context"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestExpBackoff checks expBackoff against Java's ExponentialBackoff at the
// ends of its jitter (u = 0 and u close to 1) and where it stops growing.
func TestExpBackoff(t *testing.T) {
	const hi = 0.999999
	tests := []struct {
		name         string
		initial, max int64
		attempts     int
		u            float64
		want         int64
	}{
		{"first attempt, low jitter", 10000, 30000, 0, 0, 8000},
		{"first attempt, high jitter", 10000, 30000, 0, hi, 11999},
		{"second attempt doubles", 10000, 30000, 1, 0, 16000},
		{"capped at max", 10000, 30000, 5, hi, 30000},
		{"max below initial: constant max, no jitter", 40000, 30000, 3, hi, 30000},
		// A negative setting: the start stays negative, times 2^attempts.
		{"negative, low jitter", -1, 30000, 0, 0, 0},    // (long)(-0.8) = 0
		{"negative, high jitter", -1, 30000, 0, hi, -1}, // (long)(-1.19) = -1
		{"negative, later attempt", -1, 30000, 4, 0, -12},
		{"negative max: constant", -1, -5, 2, 0.5, -5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expBackoff(tt.initial, tt.max, tt.attempts, 0.2, tt.u); got != tt.want {
				t.Errorf("expBackoff(%d, %d, %d, 0.2, %v) = %d, want %d", tt.initial, tt.max, tt.attempts, tt.u, got, tt.want)
			}
		})
	}
}

// stuckListener returns the address of a listener that never completes a
// handshake: its accept queue (backlog 0) holds one connection nobody
// accepts, so Linux drops the SYNs of every later connect, which stays in
// SYN_SENT until its dialer gives up.
func stuckListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	filler, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return addr
}

var setupTimeoutLine = regexp.MustCompile(`^Disconnecting from node -1 due to socket connection setup timeout\. The timeout value is (-?\d+) ms\.$`)

// setupTimeouts returns the timeout values of the setup-timeout lines
// logged so far, in order.
func setupTimeouts(l *logCapture) []int64 {
	var out []int64
	for _, m := range l.lines() {
		if g := setupTimeoutLine.FindStringSubmatch(m); g != nil {
			n, _ := strconv.ParseInt(g[1], 10, 64)
			out = append(out, n)
		}
	}
	return out
}

// TestSetupTimeout: an attempt that cannot connect is closed after
// socket.connection.setup.timeout.ms, logged in NetworkClient's words, and
// retried with a timeout that doubles up to the max; a negative value is
// accepted, as Java accepts it, and gives every attempt a timeout of 0 or
// less. The listener never answers, so each attempt must end by its
// timeout: nothing here races a timer.
func TestSetupTimeout(t *testing.T) {
	tests := []struct {
		name     string
		setup    string
		check    func(i int, ms int64) bool
		wantText string
	}{
		{"negative, as Java takes it", "-1", func(_ int, ms int64) bool { return ms <= 0 }, "0 or less"},
		// 100 ms x2 per attempt, 20% jitter, capped at 300 ms: Java's
		// exponent stops at log2(300/100), so the third is 300 x 0.8-1.2,
		// capped.
		{"exponential up to the max", "100", func(i int, ms int64) bool {
			switch i {
			case 0:
				return ms >= 80 && ms < 120
			case 1:
				return ms >= 160 && ms < 240
			}
			return ms >= 240 && ms <= 300
		}, "80-120, 160-240, then 240-300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := stuckListener(t)
			cfg, err := ParseConfig(map[string]string{"bootstrap.servers": addr,
				"socket.connection.setup.timeout.ms": tt.setup, "socket.connection.setup.timeout.max.ms": "300",
				"reconnect.backoff.ms": "10", "reconnect.backoff.max.ms": "20"})
			if err != nil {
				t.Fatal(err)
			}
			logs := &logCapture{}
			p, err := New(cfg, WithLogger(slog.New(logs)))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				p.Close(ctx)
				if t.Failed() {
					logs.dump(t)
				}
			}()
			waitFor(t, "3 setup timeouts", func() bool { return len(setupTimeouts(logs)) >= 3 })
			for i, ms := range setupTimeouts(logs)[:3] {
				if !tt.check(i, ms) {
					t.Errorf("attempt %d: setup timeout %d ms, want %s", i, ms, tt.wantText)
				}
			}
			st := p.Stats()
			if st.ConnectFailures < 3 || st.ConnectionsOpened != 0 {
				t.Errorf("stats: %+v, want 3 connect failures and no connection", st)
			}
			if i := logs.index("could not be established"); i >= 0 {
				t.Errorf("a setup timeout logged as a refused connection: %s", logs.lines()[i])
			}
		})
	}
}
