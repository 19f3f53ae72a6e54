package repro

import (
	"fmt"
	"io"
	"strings"

	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/repro"
)

// maxReportConns bounds the connections a Markdown report lists: it is
// pasted into an issue, and -o json has them all.
const maxReportConns = 50

var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;", "|", `\|`, "#", `\#`,
)

// md keeps text from being read as Markdown markup or raw HTML, and from
// ending a table row.
func md(s string) string { return strings.ReplaceAll(mdEscaper.Replace(s), "\n", " ") }

// reportTitle says, for the title, what the run found.
func reportTitle(res *repro.CommandResult) string {
	client := "the client"
	if res.Client.Identified() {
		client = res.Client.String()
	}
	switch res.Status {
	case repro.StatusHeld:
		return client + " holds the sockets of connections the broker closed (CLOSE_WAIT after the broker's idle close)"
	case repro.StatusOK:
		return client + " closes the connections the broker closes"
	}
	return "kdiag repro could not see what " + client + " does with the broker's idle close"
}

// writeMarkdownReport writes a -- CMD run as Markdown to paste into an
// issue of the client's project: what was run, on what, what happened to
// each connection, the sockets at the worst moment and what it means. The
// command line has its secrets masked (redact.Args, in the result), and
// CMD's stderr is not quoted beyond the lines the verdict needs.
func writeMarkdownReport(w io.Writer, res *repro.CommandResult) error {
	ew := &errWriter{w: w}
	ew.printf("## %s\n\n", md(reportTitle(res)))
	ew.printf("**%s**\n\n", md(res.Verdict))
	ew.printf("| | |\n|---|---|\n")
	ew.printf("| Client | %s |\n", md(clientSentence(res)))
	kernel := res.Kernel
	if kernel == "" {
		kernel = "unknown"
	}
	ew.printf("| Kernel | Linux %s |\n", md(kernel))
	where := "127.0.0.1"
	if res.NetNS {
		where += fmt.Sprintf(", in a private network namespace with net.ipv4.tcp_fin_timeout %ds", res.FinTimeoutS)
	}
	ew.printf("| Brokers | %d embedded Kafka brokers of kdiag (franz-go's kfake) on %s; topic %s |\n", len(res.Brokers), md(where), md(res.Topic))
	ew.printf("| Broker idle close | %s |\n", md(closesSentence(res)))
	first := "never"
	if res.FirstConnectMS >= 0 {
		first = "at " + at(res.FirstConnectMS)
	}
	if len(res.Connections) > 0 {
		ew.printf("| Connections | %s |\n", md(growthSentence(res)))
	}
	ew.printf("| Watched | %s after the first connection (%s), sockets sampled every %s; a socket held past %s counts as held |\n\n",
		human.AgeMS(res.DurationMS), first, brief(res.SampleMS), human.AgeMS(res.MaxHoldMS))

	ew.printf("What was run (secrets masked; the bootstrap list also in %s):\n\n", md(strings.Join(res.BootstrapEnv, ", ")))
	ew.printf("```\n%s\n```\n\n", strings.ReplaceAll(strings.Join(res.Command, " "), "```", "'''"))

	if len(res.Connections) > 0 {
		ew.printf("### Each connection (times since the command started)\n\n")
		ew.printf("| # | node | client → broker | opened | requests | closed | by | idle then | the client then | CLOSE_WAIT | Recv-Q | CLOSE, fd held | reconnected |\n")
		ew.printf("|---:|---:|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|\n")
		for i, c := range res.Connections {
			if i == maxReportConns {
				ew.printf("\n%d more connections are in `kdiag repro -o json`.\n", len(res.Connections)-maxReportConns)
				break
			}
			closed, by, idle := "-", "open", "-"
			if c.ClosedMS >= 0 {
				closed, by, idle = at(c.ClosedMS), closedByWords(c.ClosedBy), brief(c.IdleMS)
			}
			then, cw, rq, held, next := "-", "-", "-", "-", "-"
			if c.ClosedBy == "broker" {
				then = c.Outcome
				if c.Held {
					then += " (held)"
				}
				cw, rq = brief(c.CloseWaitMS), fmt.Sprint(c.RecvQ)
				if c.HeldCloseMS > 0 || c.Outcome == repro.OutcomeHeldClose {
					held = at(c.HeldCloseMS)
				}
				if c.ReconnectMS >= 0 {
					next = fmt.Sprintf("%s (node %d)", at(c.ReconnectMS), c.ReconnectNode)
				}
			}
			ew.printf("| %d | %d | %s → %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.ID, c.Node, md(c.Client), md(c.Broker),
				at(c.OpenedMS), c.Requests, closed, md(by), idle, md(then), cw, rq, held, next)
		}
		ew.printf("\n")
	}
	if len(res.Excerpt) > 0 {
		ew.printf("### The sockets when the most were held (as `ss -tanpo` lists them)\n\n")
		ew.printf("```\n%-11s %-6s %-6s %-21s %-21s %s\n", "State", "Recv-Q", "Send-Q", "Local", "Peer", "Process")
		for _, l := range res.Excerpt {
			ew.printf("%s\n", l)
		}
		ew.printf("```\n\n")
	}
	if res.Threads != nil && len(res.Threads.Network) > 0 {
		ew.printf("### The client's network threads while it held them\n\n")
		for _, n := range res.Threads.Network {
			ew.printf("- `%s`: %s\n", strings.ReplaceAll(n.Name, "`", "'"), md(n.Words()))
		}
		ew.printf("\n")
	}
	if res.Exit != nil && !res.Exit.ByKdiag {
		ew.printf("### The command exited at %s: %s\n\n", at(res.Exit.AtMS), md(res.Exit.Status))
		if len(res.StderrTail) > 0 {
			ew.printf("Its last lines on stderr:\n\n```\n%s\n```\n\n", strings.ReplaceAll(strings.Join(res.StderrTail, "\n"), "```", "'''"))
		}
	}
	ew.printf("### What it means\n\n")
	ew.printf("%s\n\n", md(meaning(res)))
	if res.Fix != "" {
		ew.printf("**Fix:** %s\n\n", md(res.Fix))
	}
	if res.Ends != "" {
		ew.printf("**What closes such a socket until then:** %s\n\n", md(res.Ends))
	}
	for _, n := range res.Notes {
		ew.printf("- %s\n", md(n))
	}
	if len(res.Notes) > 0 {
		ew.printf("\n")
	}
	ew.printf("<sub>Made with `kdiag repro -- CMD`: it ran the command against its embedded cluster, read the command's sockets and the broker's log of every connection, and closed idle connections as the broker does.</sub>\n")
	return ew.err
}

// closesSentence says how the broker's idle closes came.
func closesSentence(res *repro.CommandResult) string {
	if res.Closes == repro.ClosesIdle {
		return fmt.Sprintf("connections.max.idle.ms %s: each broker closed a connection idle that long, on its own timer", human.AgeMS(res.BrokerIdleMS))
	}
	closed := 0
	for _, r := range res.Rounds {
		closed += r.Closed
	}
	return fmt.Sprintf("driven: every %s from the first connection, every connection with no request in flight was closed as the broker's idle close (%s, %s)",
		human.AgeMS(res.BrokerIdleMS), human.Plural(len(res.Rounds), "round"), human.Plural(closed, "close"))
}

// meaning says what the verdict means for this client, in the catalog's
// words when it knows the client.
func meaning(res *repro.CommandResult) string {
	lib := res.Client.Catalog()
	switch {
	case res.Status == repro.StatusUnknown:
		return "The run could not show what the client does with a connection the broker closed; the verdict says why."
	case lib == nil && res.Status == repro.StatusHeld:
		return "The broker closed connections that the program did not close in return: each socket stays in CLOSE_WAIT, with its file descriptor, until the program closes it. A program that does this with every idle connection runs out of file descriptors."
	case lib == nil:
		return "The program closed its end of every connection the broker closed: no socket stayed in CLOSE_WAIT."
	case res.Status == repro.StatusHeld:
		return lib.CloseWait
	}
	return fmt.Sprintf("No socket stayed in CLOSE_WAIT past the hold allowed: %s reads every connection it holds (%s).", lib.Name, lib.Reads.Says)
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
