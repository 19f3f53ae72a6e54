// The verdict of a RunCommand run: one line, a status and an exit code.

package repro

import (
	"fmt"
	"strings"

	"github.com/kdiag/kdiag/internal/human"
)

// Statuses of a RunCommand run, and the exit codes kdiag repro -- CMD
// gives them (internal/cmdutil/exit.go: ExitOK, ExitFindings,
// ExitUnknown).
const (
	StatusOK      = "OK"
	StatusHeld    = "HELD"
	StatusUnknown = "UNKNOWN"
)

// judgeCommand writes res.Status, Verdict, ExitCode, Fix and Ends. A socket
// held past MaxHold is a finding whatever else happened (HELD, 1); a run
// that could not see what the client does with the broker's close is
// UNKNOWN (3), saying why: CMD exited early, never connected, or no close
// could be driven; otherwise OK (0).
func judgeCommand(res *CommandResult, o CommandOptions) {
	client := clientName(res)
	var closed, held, atOnce, later, reconnected []*Conn
	var longest *Conn
	for _, c := range res.Connections {
		if c.ClosedBy != "broker" {
			continue
		}
		closed = append(closed, c)
		switch {
		case c.Held:
			held = append(held, c)
		case c.Outcome == OutcomeClosedAtOnce:
			atOnce = append(atOnce, c)
		case c.Outcome == OutcomeClosedLater:
			later = append(later, c)
		}
		if c.ReconnectMS >= 0 {
			reconnected = append(reconnected, c)
		}
		if longest == nil || c.HeldMS() > longest.HeldMS() {
			longest = c
		}
	}
	maxHold := human.AgeMS(res.MaxHoldMS)
	grew := ""
	if res.Grew {
		grew = fmt.Sprintf("; connections grew from %d to %d", res.ConnectionsFrom, res.ConnectionsTo)
	}
	early := res.Exit != nil && !res.Exit.ByKdiag

	switch {
	case len(held) > 0:
		res.Status, res.ExitCode = StatusHeld, 1
		res.Verdict = fmt.Sprintf("HELD: %s held %d of %s the broker closed for up to %s, past --max-hold %s (%s)%s%s",
			client, len(held), human.Plural(len(closed), "connection"), human.AgeMS(longest.HeldMS()), maxHold,
			holdWords(longest), threadWords(res), grew)
		if lib := res.Client.Catalog(); lib != nil {
			res.Fix, res.Ends = lib.Fix, lib.Ends
		}
	case res.Interrupted:
		res.Status, res.ExitCode = StatusUnknown, 3
		res.Verdict = "UNKNOWN: interrupted before the run's end"
	case res.FirstConnectMS < 0 && early:
		res.Status, res.ExitCode = StatusUnknown, 3
		res.Verdict = fmt.Sprintf("UNKNOWN: the command exited after %s with %s before connecting to the brokers%s",
			briefMS(res.Exit.AtMS), res.Exit.Status, tailWords(res.StderrTail))
	case res.FirstConnectMS < 0:
		res.Status, res.ExitCode = StatusUnknown, 3
		res.Verdict = fmt.Sprintf("UNKNOWN: the command never connected to the brokers in %s: %s",
			human.Age(o.ConnectTimeout), neverConnectedWhy(res))
	case early && len(closed) == 0:
		res.Status, res.ExitCode = StatusUnknown, 3
		res.Verdict = fmt.Sprintf("UNKNOWN: the command exited after %s with %s before the broker closed any of its connections%s",
			briefMS(res.Exit.AtMS), res.Exit.Status, tailWords(res.StderrTail))
	case len(closed) == 0 && res.Closes == ClosesIdle && clientClosed(res) > 0:
		// The brokers' own timer: a client whose idle timeout is shorter
		// closes first, and holds nothing.
		res.Status, res.ExitCode = StatusOK, 0
		res.Verdict = fmt.Sprintf("OK: %s closed %s itself before the brokers' idle timeout (%s), so the broker closed none%s",
			client, human.Plural(clientClosed(res), "connection"), human.AgeMS(res.BrokerIdleMS), grew)
	case len(closed) == 0:
		res.Status, res.ExitCode = StatusUnknown, 3
		res.Verdict = fmt.Sprintf("UNKNOWN: the broker closed none of %s's connections in %s: %s", client, human.AgeMS(res.DurationMS), noCloseWhy(res))
	case early:
		res.Status, res.ExitCode = StatusUnknown, 3
		res.Verdict = fmt.Sprintf("UNKNOWN: the command exited after %s with %s, before the run's end (so far: %s)%s",
			briefMS(res.Exit.AtMS), res.Exit.Status, closedWords(closed, atOnce, later, reconnected), tailWords(res.StderrTail))
	default:
		res.Status, res.ExitCode = StatusOK, 0
		res.Verdict = fmt.Sprintf("OK: %s %s; none held past --max-hold %s%s", client, closedWords(closed, atOnce, later, reconnected), maxHold, grew)
	}
}

// clientName is the client and version, or the process when it could not
// be named.
func clientName(res *CommandResult) string {
	if res.Client.Identified() {
		return res.Client.String()
	}
	if res.ClientPID != 0 {
		for _, p := range res.Processes {
			if p.PID == res.ClientPID && len(p.Command) > 0 {
				return fmt.Sprintf("pid %d (%s, client not identified)", p.PID, p.Command[0])
			}
		}
		return fmt.Sprintf("pid %d (client not identified)", res.ClientPID)
	}
	return "the command"
}

// holdWords says how the longest-held socket was held: "CLOSE_WAIT,
// Recv-Q 1, to the end", "CLOSE_WAIT 15s, then CLOSE after keepalive's
// reset, fd still open".
func holdWords(c *Conn) string {
	cw := "CLOSE_WAIT"
	if c.RecvQ > 0 {
		cw += fmt.Sprintf(", Recv-Q %d", c.RecvQ)
	}
	switch c.Outcome {
	case OutcomeHeldClose:
		return fmt.Sprintf("%s for %s, then CLOSE after keepalive's reset, its fd still open", cw, human.AgeMS(c.CloseWaitMS))
	case OutcomeClosedLater:
		return cw + ", then closed"
	}
	return cw + ", to the end"
}

// threadWords says what the client's network thread did while it held the
// sockets, when its library names one: "; its network thread
// (kafka-producer-network-thread | <client.id>) was blocked in futex 10/10
// meanwhile". The name is the library's, whole: /proc keeps 15 bytes of it.
func threadWords(res *CommandResult) string {
	th := res.Threads
	if th == nil || len(th.Network) == 0 {
		return ""
	}
	n := th.Network[0]
	name := n.Name
	if lib := res.Client.Catalog(); lib != nil && lib.Threads != nil {
		name = lib.Threads.Full
	}
	return fmt.Sprintf("; its network thread (%s) was %s meanwhile", name, n.Words())
}

// closedWords says what the client did with the connections the broker
// closed: "closed all 4 the broker closed at once and reconnected 3 times".
func closedWords(closed, atOnce, later, reconnected []*Conn) string {
	var parts []string
	switch {
	case len(atOnce) == len(closed):
		parts = append(parts, fmt.Sprintf("closed all %s the broker closed at once (within %s)", human.Plural(len(closed), "connection"), human.Age(AtOnce)))
	case len(atOnce) > 0:
		parts = append(parts, fmt.Sprintf("closed %d of %s the broker closed at once", len(atOnce), human.Plural(len(closed), "connection")))
	}
	if len(later) > 0 {
		longest := int64(0)
		for _, c := range later {
			longest = max(longest, c.CloseWaitMS)
		}
		parts = append(parts, fmt.Sprintf("held %d in CLOSE_WAIT for up to %s before closing", len(later), human.AgeMS(longest)))
	}
	if n := len(closed) - len(atOnce) - len(later); n > 0 {
		parts = append(parts, fmt.Sprintf("%d not seen after the close", n))
	}
	if len(reconnected) > 0 {
		parts = append(parts, fmt.Sprintf("reconnected after %d of them", len(reconnected)))
	} else {
		parts = append(parts, "did not reconnect")
	}
	return strings.Join(parts, ", ")
}

// tailWords quotes the last lines of CMD's stderr, or says there were none.
func tailWords(lines []string) string {
	if len(lines) == 0 {
		return "; it wrote nothing on stderr"
	}
	last := lines
	if len(last) > 3 {
		last = last[len(last)-3:]
	}
	return "; the last lines of its stderr: " + strings.Join(last, " | ")
}

// neverConnectedWhy says what CMD connected to instead, if anything.
func neverConnectedWhy(res *CommandResult) string {
	ask := "does it take the bootstrap list from {bootstrap} in its arguments, or from " + strings.Join(res.BootstrapEnv, " or ") + " (--bootstrap-env names others)?"
	if len(res.OtherRemotes) > 0 {
		return fmt.Sprintf("it connected to %s instead: it ignores the bootstrap list (%s); %s",
			strings.Join(res.OtherRemotes, ", "), res.Bootstrap, ask)
	}
	return "no TCP connection of its processes was seen; " + ask
}

// noCloseWhy says why no close could be made.
func noCloseWhy(res *CommandResult) string {
	if res.Closes == ClosesIdle {
		return fmt.Sprintf("none was idle for %s (the brokers' own idle timer, --broker-closes idle); the driven closes do not wait for that", human.AgeMS(res.BrokerIdleMS))
	}
	if len(res.Rounds) == 0 {
		return "the run ended before the first driven close; run it longer (--duration)"
	}
	return fmt.Sprintf("every one had a request in flight at each of the %s (a client that waits on a long request, a Fetch?)",
		human.Plural(len(res.Rounds), "driven close"))
}

// clientClosed counts the connections the client closed first while the
// run watched (not as kdiag stopped it).
func clientClosed(res *CommandResult) int {
	n := 0
	for _, c := range res.Connections {
		if c.ClosedBy == "client" {
			n++
		}
	}
	return n
}
