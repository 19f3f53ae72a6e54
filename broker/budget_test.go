package broker

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBudgetRefusesFrameLargerThanBound(t *testing.T) {
	b := newRequestBudget(1000, nil)
	if _, err := b.admit(1000); err != nil {
		t.Fatalf("a frame of exactly the bound: %v", err)
	}
	_, err := b.admit(1001)
	if !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("a frame over the bound: %v, want ErrRequestTooLarge", err)
	}
	const want = "invalid receive: size 1001 larger than the broker's bound on queued request bytes 1000 (--max-queued-request-bytes, Kafka's queued.max.request.bytes)"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestBudgetGrantsOnlySafeRoom checks the rule: room is granted while every
// frame can still be read whole.
func TestBudgetGrantsOnlySafeRoom(t *testing.T) {
	type frame struct{ size, held int64 }
	tests := []struct {
		name   string
		frames []frame // frames[0] asks for n
		n      int64
		want   bool
	}{
		{"alone, up to the bound", []frame{{100, 0}}, 100, true},
		{"beyond what is free", []frame{{60, 0}, {50, 50}}, 60, false},
		{"a frame that would block one that cannot finish otherwise", []frame{{100, 0}, {100, 4}}, 4, false},
		{"a small frame beside an announcer that holds a little", []frame{{10, 0}, {100, 4}}, 10, true},
		{"a small frame that would leave the announcer short", []frame{{10, 0}, {100, 95}}, 10, false},
		{"read whole frames give their room back", []frame{{50, 0}, {60, 60}}, 40, true},
		{"a frame held by kfake counts once it is done", []frame{{50, 10}, {30, 30}, {50, 10}}, 20, true},
		{"two partial frames that each need more than is free", []frame{{80, 40}, {80, 40}}, 50, false},
		{"announced frames holding nothing never block", []frame{{50, 0}, {100, 0}, {100, 0}}, 50, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newRequestBudget(100, nil)
			var fs []*heldFrame
			for _, f := range tt.frames {
				h, err := b.admit(f.size)
				if err != nil {
					t.Fatal(err)
				}
				h.held = f.held
				b.used += f.held
				fs = append(fs, h)
			}
			if got := b.safe(fs[0], tt.n); got != tt.want {
				t.Errorf("safe = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBudgetReadersNeverDeadlock: many readers each read a frame as
// frameReader does (room doubling as bytes arrive), together holding far
// more than the bound. Every one must finish, and the room held never
// passes the bound.
func TestBudgetReadersNeverDeadlock(t *testing.T) {
	const bound = 256 << 10
	var waited atomic.Int32
	b := newRequestBudget(bound, func(used, max int64) { waited.Add(1) })
	rng := rand.New(rand.NewPCG(30, 30))
	sizes := make([]int64, 120)
	for i := range sizes {
		sizes[i] = 1 + rng.Int64N(bound)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		peak  int64
		start = make(chan struct{})
	)
	for _, size := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := b.admit(size)
			<-start
			if err == nil {
				// Bytes arrive: room doubles, and other readers run
				// between.
				for n := min(size, 4<<10); err == nil; n = min(size, 2*n) {
					err = b.reserve(f, n, nil)
					mu.Lock()
					peak = max(peak, b.inUse())
					mu.Unlock()
					runtime.Gosched()
					if n == size {
						break
					}
				}
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			runtime.Gosched() // kfake handles it
			b.release(f)
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("readers still waiting after 60s: %d bytes held", b.inUse())
	}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if peak > bound {
		t.Errorf("%d bytes held at once, over the bound %d", peak, bound)
	}
	if b.inUse() != 0 {
		t.Errorf("%d bytes held after every frame was released", b.inUse())
	}
	if waited.Load() == 0 {
		t.Errorf("no reader waited: %d frames of up to %d bytes never reached the bound", len(sizes), bound)
	}
}

// TestBudgetWaitEnds: a reader waiting for room goes on when room is given
// back, and gives up when its connection closes.
func TestBudgetWaitEnds(t *testing.T) {
	b := newRequestBudget(100, nil)
	first, _ := b.admit(100)
	if err := b.reserve(first, 100, nil); err != nil {
		t.Fatal(err)
	}
	second, _ := b.admit(100)
	got := make(chan error, 1)
	go func() { got <- b.reserve(second, 10, nil) }()

	cancel := make(chan struct{})
	third, _ := b.admit(100)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- b.reserve(third, 10, cancel) }()
	close(cancel)
	if err := <-gaveUp; !errors.Is(err, errBudgetClosed) {
		t.Errorf("wait after its connection closed: %v, want errBudgetClosed", err)
	}

	select {
	case err := <-got:
		t.Fatalf("second reader got room (%v) while the first held all of it", err)
	default:
	}
	b.release(first)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A released frame can hold nothing.
	if err := b.reserve(first, 1, nil); !errors.Is(err, errBudgetClosed) {
		t.Errorf("room for a released frame: %v, want errBudgetClosed", err)
	}
}

func TestAcceptBackoff(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 10 {
		d = nextAcceptDelay(d)
		got = append(got, d)
	}
	ms := time.Millisecond
	want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}

	accept := func(errno syscall.Errno) error {
		return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
	}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{accept(syscall.EMFILE), true},
		{accept(syscall.ENFILE), true},
		{accept(syscall.ENOBUFS), true},
		{accept(syscall.ENOMEM), true},
		{accept(syscall.ECONNABORTED), true},
		{accept(syscall.EINVAL), false},
		{&net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}, false},
	} {
		if got := acceptRetryable(tt.err); got != tt.want {
			t.Errorf("acceptRetryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestBudgetWarnsOncePerEpisode: the warning comes when a reader first
// waits, not again while the broker stays near its bound, and again once it
// has drained.
func TestBudgetWarnsOncePerEpisode(t *testing.T) {
	var warned atomic.Int32
	b := newRequestBudget(100, func(used, max int64) { warned.Add(1) })
	hold := func(size int64) *heldFrame {
		f, err := b.admit(size)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// wait reserves n for f in the background once it must wait, and
	// returns a channel for the result.
	wait := func(f *heldFrame, n int64) chan error {
		got := make(chan error, 1)
		before := warned.Load()
		go func() { got <- b.reserve(f, n, nil) }()
		waitFor(t, 10*time.Second, "the reader waits", func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.waiting == 1 || warned.Load() > before
		})
		return got
	}

	full := hold(100)
	if err := b.reserve(full, 100, nil); err != nil {
		t.Fatal(err)
	}
	small := hold(10)
	got := wait(small, 10)
	b.release(full)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// Still near the bound's episode: a second wait is not told of.
	big := hold(100)
	got = wait(big, 100)
	b.release(small)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := warned.Load(); n != 1 {
		t.Fatalf("%d warnings for one episode, want 1", n)
	}
	// Drained: the next wait is a new episode.
	b.release(big)
	again := hold(100)
	if err := b.reserve(again, 100, nil); err != nil {
		t.Fatal(err)
	}
	got = wait(hold(10), 10)
	b.release(again)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := warned.Load(); n != 2 {
		t.Errorf("%d warnings after two episodes, want 2", n)
	}
}

// TestQueuedRoomIsGivenBack: on one connection, frames that each take more
// than half the bound are read one after another, answered or not (acks=0
// gets no answer: its room is given back once kfake has taken it), so the
// bound never stops a connection behind its own requests.
func TestQueuedRoomIsGivenBack(t *testing.T) {
	c, logs := startTest(t, Config{MaxQueuedRequestBytes: 1 << 20})
	conn := dialBroker(t, c.Addrs()[0])
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	quiet := produceFrameAcks(t, 700<<10, 0)
	for i := range 3 {
		if _, err := conn.Write(quiet); err != nil {
			t.Fatalf("acks=0 frame %d: %v", i, err)
		}
	}
	answered := produceFrame(t, 700<<10)
	for i := range 3 {
		if _, err := conn.Write(answered); err != nil {
			t.Fatalf("acks=1 frame %d: %v", i, err)
		}
		if err := readProduceResponse(conn); err != nil {
			t.Fatalf("acks=1 frame %d: %v\nlog:\n%s", i, err, logs)
		}
	}
	apiVersions(t, conn, 7)
	// The room of the last answer is given back as the broker writes it,
	// which the client can see first.
	waitFor(t, 10*time.Second, "no room held with every request answered", func() bool { return c.budget.inUse() == 0 })
}
