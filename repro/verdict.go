package repro

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kdiag/kdiag/internal/human"
)

// judge writes res.Verdict from what was observed and checks it against what
// the scenario is meant to show (res.AsExpected).
func judge(sc Scenario, res *Result) {
	brokerIdleCloses, clientIdleCloses := -1, -1
	if res.Broker != nil {
		brokerIdleCloses = res.Broker.ClosedIdle
	}
	if res.Client != nil {
		clientIdleCloses = int(res.Client.ClosedIdle)
	}
	grew, from, to := growth(res.Series)
	// A socket seen in CLOSE_WAIT for less than AtOnce was read and closed
	// at once: a sample caught it in flight. A stalled client's are held
	// by the run until it releases the callbacks, however long that is.
	held := res.CloseWaitFinal > 0 || res.CloseWaitOldestMS >= AtOnce.Milliseconds() || sc.BlockCallbacks && res.CloseWaitPeak > 0
	neverConnected := res.EstablishedPeak == 0 && res.CloseWaitPeak == 0 && len(res.Series) > 0

	switch {
	case res.ProducerExited != "":
		res.Verdict = "could not run: the producer exited early: " + res.ProducerExited
	case neverConnected:
		res.Verdict = "no connection seen: the producer never connected to the brokers (is " + res.Bootstrap + " reachable?)"
	case res.CloseWaitFinal > 0 && sc.Expect == ExpectGrowth && grew:
		res.Verdict = fmt.Sprintf("CLOSE_WAIT growing: %s at the end, oldest %s; connections grew from %d in the first third of the run to %d — %s",
			human.Plural(res.CloseWaitFinal, "socket"), human.AgeMS(res.CloseWaitOldestMS), from, to, sc.Cause)
	case res.CloseWaitFinal > 0:
		res.Verdict = fmt.Sprintf("CLOSE_WAIT held: %s, oldest %s — %s",
			human.Plural(res.CloseWaitFinal, "socket"), human.AgeMS(res.CloseWaitOldestMS), sc.Cause)
	case held:
		res.Verdict = fmt.Sprintf("CLOSE_WAIT came and went: up to %s, the longest for %s — %s",
			human.Plural(res.CloseWaitPeak, "socket"), human.AgeMS(res.CloseWaitOldestMS), sc.Cause)
	default:
		res.Verdict = "OK: no CLOSE_WAIT held"
		if parts := whoClosed(res, clientIdleCloses, brokerIdleCloses); len(parts) > 0 {
			res.Verdict += " — " + strings.Join(parts, "; ")
		}
	}
	if sc.Expect == ExpectNoCloseWait && clientIdleCloses == 0 && brokerIdleCloses > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the client closed no idle connection itself: it closes one only when a poll ends, "+
			"and at this scale its poll waits up to metadata.max.age.ms (%s), longer than the %s between its idle timeout and the broker's; "+
			"at real scale request.timeout.ms, which is not scaled here, makes it poll at least twice in that gap",
			human.AgeMS(msOf(res.Config["metadata.max.age.ms"])), human.AgeMS(res.BrokerIdleMS-msOf(res.Config["connections.max.idle.ms"]))))
	}
	if res.Interrupted {
		res.Verdict = "interrupted: " + res.Verdict
	}

	ok := false
	switch sc.Expect {
	case ExpectNoCloseWait:
		// -1 is unknown (a real cluster has no broker counts).
		ok = !held && max(clientIdleCloses, 0)+max(brokerIdleCloses, 0) > 0
	case ExpectBrokerClosesClientFollows:
		peerCloses := brokerIdleCloses
		if peerCloses < 0 && res.Client != nil {
			peerCloses = int(res.Client.PeerCloses)
		}
		ok = !held && peerCloses > 0
	case ExpectHeld:
		ok = res.CloseWaitFinal > 0
	case ExpectGrowth:
		ok = res.CloseWaitFinal > 0 && grew
	case ExpectWhileBlocked:
		ok = res.CallbacksReleasedMS > 0 && res.CloseWaitPeak > 0 && res.CloseWaitFinal == 0
	}
	res.AsExpected = ok && !res.Interrupted && res.ProducerExited == "" && !neverConnected
}

// whoClosed says, for a run that held no CLOSE_WAIT, who closed the idle
// connections and what the client did next: its own idle closes, the
// broker's (each FIN read at once, with the longest CLOSE_WAIT a sample
// caught), and its reconnects. A count of -1 is unknown (a real cluster
// has no broker counts).
func whoClosed(res *Result, client, brokerCloses int) []string {
	var parts []string
	if client > 0 {
		parts = append(parts, fmt.Sprintf("the client closed %s itself", human.Plural(client, "idle connection")))
	}
	if brokerCloses > 0 {
		what := "idle connection"
		if client > 0 {
			what = "other"
		}
		s := fmt.Sprintf("the broker closed %s and the client read the FIN and closed at once", human.Plural(brokerCloses, what))
		if res.CloseWaitPeak > 0 {
			s += fmt.Sprintf(" (CLOSE_WAIT for at most %s)", briefMS(res.CloseWaitOldestMS))
		}
		parts = append(parts, s)
	}
	if res.Client != nil && res.Client.Reconnects > 0 && (client > 0 || brokerCloses > 0) {
		parts = append(parts, fmt.Sprintf("it reconnected %s (reconnect churn)", human.Plural(int(res.Client.Reconnects), "time")))
	}
	return parts
}

// growth compares the connections held (ESTABLISHED + CLOSE_WAIT) in the
// first and last thirds of the run: grew when the last third's lowest count
// is above the first third's highest. from is that highest, to the final
// count.
func growth(series []Sample) (grew bool, from, to int) {
	if len(series) < 3 {
		return false, 0, 0
	}
	third := len(series) / 3
	held := func(s Sample) int { return s.Established + s.CloseWait }
	firstMax, lastMin := 0, int(^uint(0)>>1)
	for _, s := range series[:third] {
		firstMax = max(firstMax, held(s))
	}
	for _, s := range series[len(series)-third:] {
		lastMin = min(lastMin, held(s))
	}
	return lastMin > firstMax, firstMax, held(series[len(series)-1])
}

// briefMS writes a time below a second in milliseconds ("40ms"), where
// human.AgeMS would round it to 0s, and longer ones as human.AgeMS does.
func briefMS(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return human.AgeMS(ms)
}

// msOf reads a number of milliseconds the run itself wrote, 0 if it is
// not one.
func msOf(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
