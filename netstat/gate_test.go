package netstat

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"
)

// gated is a Scanner over the real /proc whose state-change counter and
// clock the test sets, so that each scan's choice between a dump and the
// last dump is the test's to predict.
type gated struct {
	*Scanner
	count uint64
	err   error
	calls int
	masks []StateSet
	clock time.Time
}

func newGated(t *testing.T, source string) *gated {
	t.Helper()
	g := &gated{Scanner: NewScanner("/proc"), clock: time.Now()}
	g.Source = source
	g.RefreshEvery = 5 * time.Second
	g.Now = func() time.Time { return g.clock }
	g.Changes = func(mask StateSet) (uint64, error) {
		g.calls++
		g.masks = append(g.masks, mask)
		return g.count, g.err
	}
	return g
}

func (g *gated) scan(t *testing.T, q Query) *Snapshot {
	t.Helper()
	snap, err := g.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// closeWaitAges returns the CLOSE_WAIT sockets of snap by inode, with their ages.
func closeWaitAges(snap *Snapshot) map[uint64]Socket {
	out := map[uint64]Socket{}
	for _, s := range snap.Sockets {
		if s.State == CloseWait {
			out[s.Inode] = s
		}
	}
	return out
}

// TestScanGate checks when a scan with Changes serves its last dump: while
// the counter holds and the dump is younger than RefreshEvery, for the same
// query; and that it dumps again on any of those changing.
func TestScanGate(t *testing.T) {
	f := newFixture(t)
	for i, src := range sources(t) {
		t.Run(src, func(t *testing.T) {
			g := newGated(t, src)
			q := Query{States: States(CloseWait), PIDs: []int{os.Getpid(), f.child.PID}}
			if s := g.scan(t, q); s.Unchanged {
				t.Fatal("first scan is Unchanged: it has no dump to serve")
			}
			// The second finds the count still: it dumps (the gate keeps a
			// dump only once it has seen one), and keeps its dump.
			g.clock = g.clock.Add(time.Second)
			first := g.scan(t, q)
			if first.Unchanged {
				t.Fatal("second scan is Unchanged: the first dump was not kept")
			}
			if len(g.masks) != 2 || g.masks[0] != States(CloseWait) {
				t.Errorf("Changes asked for %v, want [%v %v]", g.masks, States(CloseWait), States(CloseWait))
			}
			open := len(f.closeWait) - i // the sources before closed one each
			before := closeWaitAges(first)
			if len(before) != open {
				t.Fatalf("first scan: %d CLOSE_WAIT, want %d", len(before), open)
			}

			// A socket that goes away while the counter holds is still
			// served: proof that the next scan did not dump. (The real
			// counter would have moved: the close is a state change.)
			gone := f.closeWait[i] // one of this process's, one per source
			gone.Close()
			g.clock = g.clock.Add(2 * time.Second)
			second := g.scan(t, q)
			if !second.Unchanged {
				t.Fatal("second scan dumped although the counter held")
			}
			if second.Dump == 0 || second.Dump != first.Dump {
				t.Errorf("served snapshot has Dump %d, want the first's %d", second.Dump, first.Dump)
			}
			if !second.Time.Equal(g.clock) {
				t.Errorf("served snapshot time %v, want the scan's %v", second.Time, g.clock)
			}
			after := closeWaitAges(second)
			if len(after) != len(before) {
				t.Errorf("served %d CLOSE_WAIT, want the dump's %d", len(after), len(before))
			}
			for ino, b := range before {
				a := after[ino]
				if b.HasAge != a.HasAge || (b.HasAge && a.Age != b.Age+2*time.Second) {
					t.Errorf("inode %d: age %v (has %v) served, want %v+2s (has %v)", ino, a.Age, a.HasAge, b.Age, b.HasAge)
				}
			}
			// Served again from the served copy: the ages advance from it.
			g.clock = g.clock.Add(1500 * time.Millisecond)
			again := closeWaitAges(g.scan(t, q))
			for ino, b := range before {
				if a := again[ino]; b.HasAge && a.Age != b.Age+3500*time.Millisecond {
					t.Errorf("inode %d: age %v served twice, want %v+3.5s", ino, a.Age, b.Age)
				}
			}

			// The counter moves: a dump, without the closed socket.
			g.count++
			g.clock = g.clock.Add(time.Second)
			third := g.scan(t, q)
			if third.Unchanged {
				t.Fatal("third scan served the last dump although the counter moved")
			}
			if third.Dump == first.Dump {
				t.Errorf("a new dump kept Dump %d", third.Dump)
			}
			if _, ok := closeWaitAges(third)[gone.Inode]; ok || len(third.Sockets) != open-1 {
				t.Errorf("third scan: %d sockets (closed one present: %v), want %d", len(third.Sockets), ok, open-1)
			}

			g.clock = g.clock.Add(time.Second)
			if s := g.scan(t, q); !s.Unchanged {
				t.Error("fourth scan dumped although nothing moved")
			}

			// RefreshEvery elapsed since the dump (5.5 s, though only 4.5 s
			// since the last snapshot served): a dump.
			g.clock = g.clock.Add(4500 * time.Millisecond)
			if s := g.scan(t, q); s.Unchanged {
				t.Error("served a dump older than RefreshEvery")
			}
			// A clock set back: a dump.
			g.clock = g.clock.Add(-time.Minute)
			if s := g.scan(t, q); s.Unchanged {
				t.Error("served a dump from the future")
			}
			// Another query: a dump.
			q2 := q
			q2.PIDs = []int{os.Getpid()}
			if s := g.scan(t, q2); s.Unchanged {
				t.Error("served another query's dump")
			}
			// A failed read of the counter: a dump.
			g.err = errors.New("map lookup failed")
			if s := g.scan(t, q2); s.Unchanged {
				t.Error("served the last dump although the counter could not be read")
			}
		})
	}
}

// TestScanGateUngatedStates checks that a query for TIME_WAIT, whose
// sockets change without the tracepoint seeing it, always dumps without
// asking the counter.
func TestScanGateUngatedStates(t *testing.T) {
	g := newGated(t, SourceAuto)
	for _, q := range []Query{{}, {States: States(TimeWait)}, {States: States(CloseWait, NewSynRecv)}} {
		for range 2 {
			if s := g.scan(t, q); s.Unchanged {
				t.Errorf("query for %v served the last dump", q.States)
			}
		}
	}
	if g.calls != 0 {
		t.Errorf("Changes called %d times for queries it cannot gate", g.calls)
	}
}

// TestScanGateStopsKeepingWhenWoken: the gate keeps no dump until a scan
// finds the count still; a counter that moves at every scan (connections
// churning in the watched states) serves nothing, so after wokenDrop such
// scans the gate keeps no dump again (the memory of --events off); the
// first scan that finds the count still dumps, and keeps its dump, and the
// next is served again.
func TestScanGateStopsKeepingWhenWoken(t *testing.T) {
	g := newGated(t, SourceAuto)
	q := Query{States: States(CloseWait), PIDs: []int{os.Getpid()}}
	g.scan(t, q)
	if g.gate.last != nil {
		t.Error("the first dump is kept before any scan found the count still")
	}
	g.clock = g.clock.Add(time.Second)
	g.scan(t, q) // still: keeps its dump
	for i := range wokenDrop + 2 {
		g.count++
		g.clock = g.clock.Add(time.Second)
		if s := g.scan(t, q); s.Unchanged {
			t.Fatalf("woken scan %d served", i)
		}
		if keeps := g.gate.last != nil; keeps != (i+1 < wokenDrop) {
			t.Errorf("after %d woken scans the gate keeps a dump: %v", i+1, keeps)
		}
	}
	g.clock = g.clock.Add(time.Second)
	if s := g.scan(t, q); s.Unchanged {
		t.Fatal("served with no dump kept")
	}
	if g.gate.last == nil {
		t.Error("a scan that found the count still did not keep its dump")
	}
	g.clock = g.clock.Add(time.Second)
	if s := g.scan(t, q); !s.Unchanged {
		t.Error("the scan after a still one dumped")
	}
}

// TestScanRecycleGated checks that a snapshot the gate keeps to serve
// again is not reused when given back: the next scan serves it whole. The
// dump that replaces it decodes into its memory once the served copy was
// given back too, and leaves alone one the caller kept.
func TestScanRecycleGated(t *testing.T) {
	f := newFixture(t)
	g := newGated(t, SourceNetlink)
	if _, err := DumpNetlink(States(Listen)); err != nil {
		t.Skipf("netlink unavailable: %v", err)
	}
	q := Query{States: States(CloseWait), PIDs: []int{os.Getpid(), f.child.PID}}
	g.Recycle(g.scan(t, q))
	g.clock = g.clock.Add(time.Second)
	kept := g.scan(t, q) // the count held since the first: the gate keeps it
	want := len(kept.Sockets)
	if want != len(f.closeWait) {
		t.Fatalf("second scan: %d sockets, want %d", want, len(f.closeWait))
	}
	g.Recycle(kept)
	if len(kept.Sockets) != want {
		t.Fatalf("Recycle emptied the snapshot the gate keeps: %d sockets left of %d", len(kept.Sockets), want)
	}
	g.clock = g.clock.Add(time.Second)
	served := g.scan(t, q)
	if !served.Unchanged || len(served.Sockets) != want {
		t.Fatalf("third scan: Unchanged %v, %d sockets, want the kept dump's %d served", served.Unchanged, len(served.Sockets), want)
	}
	g.Recycle(served)
	// The counter moves: a dump, into the memory given back.
	g.count++
	g.clock = g.clock.Add(time.Second)
	dumped := g.scan(t, q)
	if dumped.Unchanged || len(dumped.Sockets) != want {
		t.Fatalf("fourth scan: Unchanged %v, %d sockets, want a dump of %d", dumped.Unchanged, len(dumped.Sockets), want)
	}
	if !sameMemory(dumped.Sockets, served.Sockets) {
		t.Error("the dump allocated anew although the gate's sockets were given back")
	}
	// Served again and kept by the caller: the next dump leaves it alone.
	g.clock = g.clock.Add(time.Second)
	held := g.scan(t, q)
	if !held.Unchanged {
		t.Fatal("fifth scan: not served")
	}
	before := slices.Clone(held.Sockets)
	g.count++
	g.clock = g.clock.Add(time.Second)
	next := g.scan(t, q)
	if next.Unchanged || len(next.Sockets) != want {
		t.Fatalf("sixth scan: Unchanged %v, %d sockets, want a dump of %d", next.Unchanged, len(next.Sockets), want)
	}
	if sameMemory(next.Sockets, held.Sockets) {
		t.Error("the dump reused a served snapshot the caller did not give back")
	}
	if !slices.Equal(held.Sockets, before) {
		t.Error("a dump altered a served snapshot the caller did not give back")
	}
	// Done scanning: DropRecycled lets go of what the gate keeps as well
	// (watch's final analysis needs the memory), and a scan after it dumps.
	if g.gate.last == nil {
		t.Fatal("the gate keeps no dump before DropRecycled")
	}
	g.DropRecycled()
	if g.gate.last != nil {
		t.Error("DropRecycled left the gate's snapshot held")
	}
	g.clock = g.clock.Add(time.Second)
	if s := g.scan(t, q); s.Unchanged {
		t.Error("the scan after DropRecycled served the dropped dump")
	}
}
