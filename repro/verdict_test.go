package repro

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/producer"
)

func TestScale(t *testing.T) {
	tests := []struct {
		d, idle, want time.Duration
	}{
		{540 * time.Second, 3 * time.Second, 2700 * time.Millisecond},
		{RealMetadataMaxAge, 3 * time.Second, 1500 * time.Millisecond},
		{RealBrokerIdle, 3 * time.Second, 3 * time.Second},
		{800 * time.Second, 3 * time.Second, 4 * time.Second},
		{RealBrokerIdle, RealBrokerIdle, RealBrokerIdle}, // a real cluster: real timers
		{0, 3 * time.Second, 0},
		{time.Millisecond, time.Second, time.Millisecond}, // never below 1ms
	}
	for _, tt := range tests {
		if got := Scale(tt.d, tt.idle); got != tt.want {
			t.Errorf("Scale(%v, %v) = %v, want %v", tt.d, tt.idle, got, tt.want)
		}
	}
}

func TestSettings(t *testing.T) {
	healthy, _ := Lookup("healthy")
	passive, _ := Lookup("passive-close")
	for _, tt := range []struct {
		sc   Scenario
		want map[string]string
	}{
		{healthy, map[string]string{"connections.max.idle.ms": "2700", "metadata.max.age.ms": "1500", "request.timeout.ms": "30000"}},
		{passive, map[string]string{"connections.max.idle.ms": "-1", "metadata.max.age.ms": "1500", "request.timeout.ms": "30000"}},
	} {
		if diff := cmp.Diff(tt.want, tt.sc.Settings(3*time.Second)); diff != "" {
			t.Errorf("%s settings (-want +got):\n%s", tt.sc.Name, diff)
		}
	}
}

func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Catalog() {
		if s.Name == "" || seen[s.Name] {
			t.Errorf("scenario name %q empty or duplicate", s.Name)
		}
		seen[s.Name] = true
		if s.Shows == "" || s.Cause == "" || s.StandsFor == "" {
			t.Errorf("%s: Shows, Cause and StandsFor are what the report says; all must be set", s.Name)
		}
		if s.Reader != "poll" && s.Reader != "on-demand" {
			t.Errorf("%s: reader %q", s.Name, s.Reader)
		}
		if s.Interval <= 0 {
			t.Errorf("%s: no interval", s.Name)
		}
		// A scenario whose client closes idle connections first must close
		// them before the broker does, at any scale.
		if s.ClientIdle >= RealBrokerIdle {
			t.Errorf("%s: client idle %v is not below the broker's %v", s.Name, s.ClientIdle, RealBrokerIdle)
		}
	}
	for _, want := range []string{"healthy", "never-idle", "passive-close", "leak", "stalled-callback"} {
		if !seen[want] {
			t.Errorf("catalog lacks %q", want)
		}
	}
}

// TestDescribe: a scenario's description names the run's timeouts, not the
// real ones it stands for (one scale in all the output).
func TestDescribe(t *testing.T) {
	healthy, _ := Lookup("healthy")
	stalled, _ := Lookup("stalled-callback")
	for _, tt := range []struct {
		sc         Scenario
		idle       time.Duration
		want, lack string
	}{
		{healthy, 3 * time.Second, "connections.max.idle.ms (2.7s) below the broker's (3s)", "9m"},
		{healthy, RealBrokerIdle, "connections.max.idle.ms (9m00s) below the broker's (10m00s)", "{"},
		{stalled, 2 * time.Second, "longer than the broker's idle timeout (2s)", "20m"},
	} {
		got := tt.sc.Describe(tt.idle)
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.lack) {
			t.Errorf("%s at %v: %q, want it to say %q and not %q", tt.sc.Name, tt.idle, got, tt.want, tt.lack)
		}
	}
	for _, sc := range Catalog() {
		if d := sc.Describe(3 * time.Second); strings.ContainsAny(d, "{}") {
			t.Errorf("%s: placeholder left in %q", sc.Name, d)
		}
	}
}

// series builds samples one SampleInterval apart from (established,
// close_wait) pairs.
func series(pairs ...[2]int) []Sample {
	var out []Sample
	for i, p := range pairs {
		d := time.Duration(i) * 200 * time.Millisecond
		out = append(out, Sample{Elapsed: d, ElapsedMS: d.Milliseconds(), Established: p[0], CloseWait: p[1]})
	}
	return out
}

func TestJudge(t *testing.T) {
	scen := func(name string) Scenario { s, _ := Lookup(name); return s }
	tests := []struct {
		name        string
		sc          Scenario
		res         Result
		wantVerdict string
		wantOK      bool
		wantNote    string
	}{
		{
			name:        "healthy: the client closed them all first",
			sc:          scen("healthy"),
			res:         Result{BrokerIdleMS: 3000, Client: &producer.Stats{ClosedIdle: 5}, Broker: &broker.Stats{}},
			wantVerdict: "OK: no CLOSE_WAIT held — the client closed 5 idle connections itself",
			wantOK:      true,
		},
		{
			name: "healthy: some closed by the client, the rest by the broker, read at once, reconnects",
			sc:   scen("healthy"),
			res: Result{BrokerIdleMS: 3000, CloseWaitPeak: 1, CloseWaitOldestMS: 40,
				Client: &producer.Stats{ClosedIdle: 2, PeerCloses: 3, Reconnects: 2}, Broker: &broker.Stats{Counts: broker.Counts{ClosedIdle: 3}}},
			wantVerdict: "OK: no CLOSE_WAIT held — the client closed 2 idle connections itself; the broker closed 3 others and the client read the FIN and closed at once (CLOSE_WAIT for at most 40ms); it reconnected 2 times (reconnect churn)",
			wantOK:      true,
		},
		{
			name: "healthy: the broker closed them all, and the run says why at this scale",
			sc:   scen("healthy"),
			res: Result{BrokerIdleMS: 3000, Config: map[string]string{"connections.max.idle.ms": "2700", "metadata.max.age.ms": "1500"},
				Client: &producer.Stats{PeerCloses: 2, Reconnects: 1}, Broker: &broker.Stats{Counts: broker.Counts{ClosedIdle: 2}}},
			wantVerdict: "OK: no CLOSE_WAIT held — the broker closed 2 idle connections and the client read the FIN and closed at once; it reconnected 1 time (reconnect churn)",
			wantOK:      true,
			wantNote:    "its poll waits up to metadata.max.age.ms (1.5s), longer than the 0.3s between its idle timeout and the broker's",
		},
		{
			name:        "healthy on a real cluster: the client's idle closes count",
			sc:          scen("healthy"),
			res:         Result{Client: &producer.Stats{ClosedIdle: 1}},
			wantVerdict: "OK: no CLOSE_WAIT held — the client closed 1 idle connection itself",
			wantOK:      true,
		},
		{
			name:        "healthy but CLOSE_WAIT lasted",
			sc:          scen("healthy"),
			res:         Result{CloseWaitPeak: 1, CloseWaitOldestMS: 1400, Client: &producer.Stats{ClosedIdle: 5}},
			wantVerdict: "CLOSE_WAIT came and went: up to 1 socket, the longest for 1.4s — a client that reads every connection holds none unless its network thread stalls (a busy machine?)",
			wantOK:      false,
		},
		{
			name:        "healthy with nothing closed shows nothing",
			sc:          scen("healthy"),
			res:         Result{Broker: &broker.Stats{}, Client: &producer.Stats{}},
			wantVerdict: "OK: no CLOSE_WAIT held",
			wantOK:      false,
		},
		{
			name:        "never-idle: the broker closed, the client followed",
			sc:          scen("never-idle"),
			res:         Result{Broker: &broker.Stats{Counts: broker.Counts{ClosedIdle: 6}}, Client: &producer.Stats{PeerCloses: 6}},
			wantVerdict: "OK: no CLOSE_WAIT held — the broker closed 6 idle connections and the client read the FIN and closed at once",
			wantOK:      true,
		},
		{
			name:        "never-idle on a real cluster: the client's peer closes count",
			sc:          scen("never-idle"),
			res:         Result{Client: &producer.Stats{PeerCloses: 2}},
			wantVerdict: "OK: no CLOSE_WAIT held",
			wantOK:      true,
		},
		{
			name:        "never-idle with nothing closed shows nothing",
			sc:          scen("never-idle"),
			res:         Result{Broker: &broker.Stats{}, Client: &producer.Stats{}},
			wantVerdict: "OK: no CLOSE_WAIT held",
			wantOK:      false,
		},
		{
			name:        "passive-close held",
			sc:          scen("passive-close"),
			res:         Result{CloseWaitPeak: 5, CloseWaitFinal: 3, CloseWaitOldestMS: 7000},
			wantVerdict: "CLOSE_WAIT held: 3 sockets, oldest 7s — the client does not read idle connections, so it never sees the broker's FIN",
			wantOK:      true,
		},
		{
			name: "leak grows",
			sc:   scen("leak"),
			res: Result{CloseWaitPeak: 9, CloseWaitFinal: 9, CloseWaitOldestMS: 2000,
				Series: series([2]int{0, 0}, [2]int{3, 0}, [2]int{6, 0}, [2]int{6, 3}, [2]int{9, 3}, [2]int{9, 6}, [2]int{12, 6}, [2]int{12, 9}, [2]int{15, 9})},
			wantVerdict: "CLOSE_WAIT growing: 9 sockets at the end, oldest 2s; connections grew from 6 in the first third of the run to 24 — producers are created per message and never closed",
			wantOK:      true,
		},
		{
			name: "leak that does not grow",
			sc:   scen("leak"),
			res: Result{CloseWaitPeak: 3, CloseWaitFinal: 3, CloseWaitOldestMS: 2000,
				Series: series([2]int{3, 0}, [2]int{3, 0}, [2]int{0, 3}, [2]int{0, 3}, [2]int{0, 3}, [2]int{0, 3})},
			wantVerdict: "CLOSE_WAIT held: 3 sockets, oldest 2s — producers are created per message and never closed",
			wantOK:      false,
		},
		{
			name:        "stalled callback, released and cleared by the end",
			sc:          scen("stalled-callback"),
			res:         Result{CloseWaitPeak: 6, CloseWaitOldestMS: 2800, CallbacksReleasedMS: 4400},
			wantVerdict: "CLOSE_WAIT came and went: up to 6 sockets, the longest for 2.8s — a send callback blocked the network thread, so nothing read the broker's FIN until it returned",
			wantOK:      true,
		},
		{
			name:        "stalled callback never released",
			sc:          scen("stalled-callback"),
			res:         Result{CloseWaitPeak: 2, CloseWaitFinal: 2, CloseWaitOldestMS: 900},
			wantVerdict: "CLOSE_WAIT held: 2 sockets, oldest 0.9s — a send callback blocked the network thread, so nothing read the broker's FIN until it returned",
			wantOK:      false,
		},
		{
			name:        "stalled callback released, but CLOSE_WAIT stayed",
			sc:          scen("stalled-callback"),
			res:         Result{CloseWaitPeak: 6, CloseWaitFinal: 1, CloseWaitOldestMS: 5000, CallbacksReleasedMS: 4400},
			wantVerdict: "CLOSE_WAIT held: 1 socket, oldest 5s — a send callback blocked the network thread, so nothing read the broker's FIN until it returned",
			wantOK:      false,
		},
		{
			name:        "the producer died",
			sc:          scen("passive-close"),
			res:         Result{CloseWaitPeak: 1, CloseWaitFinal: 1, ProducerExited: "exit status 2; its last words: unknown flag"},
			wantVerdict: "could not run: the producer exited early: exit status 2; its last words: unknown flag",
			wantOK:      false,
		},
		{
			name:        "never connected",
			sc:          scen("healthy"),
			res:         Result{Bootstrap: "kafka:9092", Client: &producer.Stats{ClosedIdle: 1}, Series: series([2]int{0, 0}, [2]int{0, 0})},
			wantVerdict: "no connection seen: the producer never connected to the brokers (is kafka:9092 reachable?)",
			wantOK:      false,
		},
		{
			name:        "interrupted runs are never as expected",
			sc:          scen("passive-close"),
			res:         Result{CloseWaitPeak: 1, CloseWaitFinal: 1, CloseWaitOldestMS: 1000, Interrupted: true},
			wantVerdict: "interrupted: CLOSE_WAIT held: 1 socket, oldest 1s — the client does not read idle connections, so it never sees the broker's FIN",
			wantOK:      false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res
			judge(tt.sc, &res)
			if res.Verdict != tt.wantVerdict {
				t.Errorf("verdict\n got %q\nwant %q", res.Verdict, tt.wantVerdict)
			}
			if res.AsExpected != tt.wantOK {
				t.Errorf("AsExpected = %v, want %v", res.AsExpected, tt.wantOK)
			}
			if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, tt.wantNote) || tt.wantNote == "" && notes != "" {
				t.Errorf("notes %q, want %q", notes, tt.wantNote)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	tb := newTailBuffer(nilLogger())
	for i := range 8 {
		_, _ = tb.Write([]byte(strings.Repeat("x", i) + "\n"))
	}
	_, _ = tb.Write([]byte("partial"))
	if got, want := tb.Tail(), "xxx | xxxx | xxxxx | xxxxxx | xxxxxxx | partial"; got != want {
		t.Errorf("Tail() = %q, want %q", got, want)
	}
}

func nilLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
