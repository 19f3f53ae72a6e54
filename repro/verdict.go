package repro

import (
	"fmt"
	"strconv"

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

	switch {
	case res.ProducerExited != "":
		res.Verdict = "could not run: the producer exited early: " + res.ProducerExited
	case res.EstablishedPeak == 0 && res.CloseWaitPeak == 0 && len(res.Series) > 0:
		res.Verdict = "no connection seen: the producer never connected to the brokers (is " + res.Bootstrap + " reachable?)"
	case res.CloseWaitFinal > 0 && sc.Expect == ExpectGrowth && grew:
		res.Verdict = fmt.Sprintf("CLOSE_WAIT growing: %s at the end, oldest %s; connections grew from %d in the first third of the run to %d — %s",
			human.Plural(res.CloseWaitFinal, "socket"), human.AgeMS(res.CloseWaitOldestMS), from, to, sc.Cause)
	case res.CloseWaitFinal > 0:
		res.Verdict = fmt.Sprintf("CLOSE_WAIT held: %s, oldest %s — %s",
			human.Plural(res.CloseWaitFinal, "socket"), human.AgeMS(res.CloseWaitOldestMS), sc.Cause)
	case res.CloseWaitPeak > 0:
		res.Verdict = fmt.Sprintf("CLOSE_WAIT came and went: up to %s, the longest for %s — %s",
			human.Plural(res.CloseWaitPeak, "socket"), human.AgeMS(res.CloseWaitOldestMS), sc.Cause)
	default:
		res.Verdict = "OK: no CLOSE_WAIT"
		switch {
		case brokerIdleCloses > 0 && clientIdleCloses > 0:
			res.Verdict += fmt.Sprintf(" — the client closed %s itself; the broker closed %s first and the client closed its end at once",
				human.Plural(clientIdleCloses, "idle connection"), human.Plural(brokerIdleCloses, "other"))
		case brokerIdleCloses > 0:
			res.Verdict += fmt.Sprintf(" — the broker closed %s and the client closed its end at once",
				human.Plural(brokerIdleCloses, "idle connection"))
		case clientIdleCloses > 0:
			res.Verdict += fmt.Sprintf(" — the client closed %s before the broker's %s idle timeout",
				human.Plural(clientIdleCloses, "idle connection"), human.AgeMS(res.BrokerIdleMS))
		}
	}
	if sc.Expect == ExpectNoCloseWait && brokerIdleCloses > 0 {
		// The client's lead is a tenth of the broker's idle timeout, 300 ms
		// at the default scale: a busy machine can delay it that much.
		res.Notes = append(res.Notes, fmt.Sprintf("the broker closed %s before the client did: at this scale the client's idle close comes %s before the broker's, and the producer was late by more than that (a busy machine?); a lower --scale widens the lead",
			human.Plural(brokerIdleCloses, "idle connection"), human.AgeMS(res.BrokerIdleMS-msOf(res.Config["connections.max.idle.ms"]))))
	}
	if res.Interrupted {
		res.Verdict = "interrupted: " + res.Verdict
	}

	ok := false
	switch sc.Expect {
	case ExpectNoCloseWait:
		ok = res.CloseWaitPeak == 0 && clientIdleCloses != 0
	case ExpectBrokerClosesClientFollows:
		peerCloses := brokerIdleCloses
		if peerCloses < 0 && res.Client != nil {
			peerCloses = int(res.Client.PeerCloses)
		}
		ok = res.CloseWaitFinal == 0 && peerCloses > 0
	case ExpectHeld:
		ok = res.CloseWaitFinal > 0
	case ExpectGrowth:
		ok = res.CloseWaitFinal > 0 && grew
	case ExpectWhileBlocked:
		ok = res.CallbacksReleasedMS > 0 && res.CloseWaitPeak > 0 && res.CloseWaitFinal == 0
	}
	neverConnected := res.EstablishedPeak == 0 && res.CloseWaitPeak == 0 && len(res.Series) > 0
	res.AsExpected = ok && !res.Interrupted && res.ProducerExited == "" && !neverConnected
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

// msOf reads a number of milliseconds the run itself wrote, 0 if it is
// not one.
func msOf(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
