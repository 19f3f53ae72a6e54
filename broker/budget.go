package broker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// DefaultMaxQueuedRequestBytes is the default bound on the request bytes the
// broker holds at once across all its connections: 32 MiB. A request costs
// the broker two to three times its size while it holds it (the frame
// buffered here as it arrives, then kfake's own copy), and large ones need
// contiguous heap that the Go runtime maps afresh: measured in a child, two
// 100 MiB frames one after the other took 553 MB of address space, over a
// 512 MiB limit, and two of 32 MiB 322 MB (BENCHMARKS.md). Kafka's
// queued.max.request.bytes is unbounded by default and, when set, may not be
// below socket.request.max.bytes (KafkaConfig.validateValues); a diagnostic
// broker is better off refusing the rare frame over 32 MiB (producers send
// 1 MB requests by default) than dying of it, and the refusal says which
// flag to raise.
const DefaultMaxQueuedRequestBytes = 32 << 20

// errBudgetClosed is what a reader waiting for room gets when its
// connection is closed under it.
var errBudgetClosed = errors.New("connection closed while waiting for room under the queued request bytes bound")

// requestBudget bounds the request bytes the broker holds across all
// connections: Kafka's queued.max.request.bytes ("the number of queued bytes
// allowed before no more requests are read", SocketServerConfigs), which a
// broker enforces with a MemoryPool that the network threads allocate each
// request's buffer from. A frame holds room from the bytes it has buffered
// until the broker is done with it (its response is written, or kfake has
// taken it and, having no response to write, moved on to the connection's
// next frame), so kfake's own copy of a frame is inside the bound too.
//
// Kafka takes room for a frame's whole announced size when it reads the
// size prefix. Here a frame takes room as its bytes arrive, as frameReader
// buffers them: a client that announces 100 MiB and sends 10 bytes holds
// the 4 KiB buffer they are read into, not the whole bound, so a few such
// clients cannot stall every other. Frames that each hold part of the bound
// and each wait for more would wait for ever, so room is granted only while
// every frame being read can still be read whole (the banker's algorithm
// with one resource): taken from the smallest remaining need up, each frame
// fits in what is free plus what the frames before it give back when done.
// A frame that cannot be granted room waits, holding what it has; frames it
// does not block go on. This is written here because a weighted semaphore
// (golang.org/x/sync/semaphore) takes room whole or deadlocks when it is
// taken in parts, and serves its waiters in order, so that one large frame
// would hold back every small one behind it.
type requestBudget struct {
	max int64

	mu   sync.Mutex
	used int64
	// frames are the frames that hold room or may ask for it: admitted
	// and not yet released.
	frames map[*heldFrame]struct{}
	// freed is closed, and replaced, whenever room is given back: only
	// then can a refused grant become possible (a grant or an admission
	// never makes another frame's grant safer).
	freed chan struct{}
	// waiting counts the readers waiting for room. onWait is called when
	// one begins to wait and no episode is under way; the episode ends
	// once no reader waits and half the bound or more is free, so that a
	// load that keeps the broker near its bound is told of once.
	waiting int
	episode bool
	onWait  func(used, max int64)
}

// heldFrame is one request frame's share of the budget.
type heldFrame struct {
	size int64 // the whole request, as its size prefix says
	held int64 // room it holds: never more than size
}

func newRequestBudget(max int64, onWait func(used, max int64)) *requestBudget {
	return &requestBudget{max: max, frames: make(map[*heldFrame]struct{}), freed: make(chan struct{}), onWait: onWait}
}

// admit registers a frame of size bytes, holding nothing yet. A frame
// larger than the whole bound could never be read: it is refused.
func (b *requestBudget) admit(size int64) (*heldFrame, error) {
	if size > b.max {
		return nil, fmt.Errorf("%w: size %d larger than the broker's bound on queued request bytes %d (--max-queued-request-bytes, Kafka's queued.max.request.bytes)", ErrRequestTooLarge, size, b.max)
	}
	f := &heldFrame{size: size}
	b.mu.Lock()
	b.frames[f] = struct{}{}
	b.mu.Unlock()
	return f, nil
}

// reserve waits until f may hold n bytes (n at most f.size; less than it
// holds already is a no-op), or until cancel is closed or f released.
func (b *requestBudget) reserve(f *heldFrame, n int64, cancel <-chan struct{}) error {
	b.mu.Lock()
	counted := false
	defer func() {
		if counted {
			b.waiting--
		}
		b.mu.Unlock()
	}()
	for {
		if _, ok := b.frames[f]; !ok {
			return errBudgetClosed
		}
		if n <= f.held {
			return nil
		}
		if b.safe(f, n) {
			b.used += n - f.held
			f.held = n
			return nil
		}
		first := false
		if !counted {
			counted = true
			b.waiting++
			first = !b.episode
			b.episode = true
		}
		freed, used := b.freed, b.used
		b.mu.Unlock()
		if first && b.onWait != nil {
			b.onWait(used, b.max)
		}
		select {
		case <-freed:
			b.mu.Lock()
		case <-cancel:
			b.mu.Lock()
			return errBudgetClosed
		}
	}
}

// release gives back all the room f holds; f can hold none after.
func (b *requestBudget) release(f *heldFrame) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.frames[f]; !ok {
		return
	}
	delete(b.frames, f)
	b.used -= f.held
	f.held = 0
	if b.waiting == 0 && b.used <= b.max/2 {
		b.episode = false
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// inUse returns the room held now.
func (b *requestBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// safe says whether granting f n bytes leaves every frame able to finish:
// with frames taken by their remaining need, smallest first, each need fits
// in what is free once the frames before it are done and have given their
// room back. Frames with nothing left to read need nothing and give their
// room back when the broker is done with them. Called with b.mu held.
func (b *requestBudget) safe(f *heldFrame, n int64) bool {
	type claim struct{ need, held int64 }
	free := b.max - b.used - (n - f.held)
	if free < 0 {
		return false
	}
	claims := make([]claim, 0, len(b.frames))
	for g := range b.frames {
		held := g.held
		if g == f {
			held = n
		}
		if need := g.size - held; need > 0 {
			claims = append(claims, claim{need, held})
		} else {
			free += held
		}
	}
	slices.SortFunc(claims, func(x, y claim) int {
		switch {
		case x.need < y.need:
			return -1
		case x.need > y.need:
			return 1
		}
		return 0
	})
	for _, c := range claims {
		if c.need > free {
			return false
		}
		free += c.held
	}
	return true
}
