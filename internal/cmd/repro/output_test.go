package repro

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/repro"
)

func progressRun(tty bool) string {
	var buf bytes.Buffer
	scs := []repro.Scenario{{Name: "healthy"}, {Name: "passive-close"}}
	p := newProgress(&buf, tty, scs, 12*time.Second)
	p.start(0)
	p.start(1)
	for i, cw := range []int{0, 0, 2, 2, 3} {
		d := time.Duration(i+1) * 1100 * time.Millisecond
		p.update(1, repro.Sample{Elapsed: d, ElapsedMS: d.Milliseconds(), Established: 3, CloseWait: cw})
		p.lastDraw = time.Time{} // draw every update in the test
	}
	p.finish(0, &repro.Result{AsExpected: true}, nil)
	p.finish(1, &repro.Result{CloseWaitPeak: 3, CloseWaitFinal: 3, AsExpected: true}, nil)
	p.close()
	return buf.String()
}

func TestProgressOnATerminalRedrawsInPlace(t *testing.T) {
	out := progressRun(true)
	// Every redraw after the first moves up over the two lines.
	if n := strings.Count(out, "\x1b[2A"); n < 5 {
		t.Errorf("%d cursor-up sequences, want one per redraw:\n%q", n, out)
	}
	last := out[strings.LastIndex(out, "\x1b[2A"):]
	for _, s := range []string{"healthy           done: CLOSE_WAIT peak 0, final 0 (as expected)", "passive-close     done: CLOSE_WAIT peak 3, final 3 (as expected)"} {
		if !strings.Contains(last, s) {
			t.Errorf("final redraw lacks %q:\n%q", s, last)
		}
	}
}

func TestProgressElsewherePrintsPlainLines(t *testing.T) {
	out := progressRun(false)
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape sequences in plain output:\n%q", out)
	}
	want := []string{
		"healthy           starting the broker and the producer",
		"passive-close     starting the broker and the producer",
		"passive-close       3.3s/12s   ESTABLISHED   3   CLOSE_WAIT   2 (peak 2)",
		"passive-close       5.5s/12s   ESTABLISHED   3   CLOSE_WAIT   3 (peak 3)",
		"healthy           done: CLOSE_WAIT peak 0, final 0 (as expected)",
		"passive-close     done: CLOSE_WAIT peak 3, final 3 (as expected)",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("plain output lacks %q:\n%s", w, out)
		}
	}
	// Unchanged counts print no line.
	if n := strings.Count(out, "CLOSE_WAIT   2 (peak 2)"); n != 1 {
		t.Errorf("the CLOSE_WAIT=2 line printed %d times, want once:\n%s", n, out)
	}
}
