package analyzer

import (
	"fmt"
	"time"

	"github.com/kdiag/kdiag/internal/human"
)

// KindReconnects: the process opens new connections to brokers over and
// over: after each idle close of the broker's (what a Java producer whose
// network thread polls does: it reads the FIN, closes, and reconnects for
// metadata), or in a storm.
const KindReconnects = "reconnect-churn"

// stormEvery is the time between reconnects to one broker below which they
// are a storm: faster than any client's reconnect backoff lets a healthy
// client go (the Java client's reconnect.backoff.ms is 50 ms, growing to
// reconnect.backoff.max.ms, 1 s, while a broker keeps failing).
const stormEvery = time.Second

// minReconnects is how many new connections a window needs before their
// rate says anything.
const minReconnects = 3

// reconnectFinding reports the connections a process opened to brokers
// during the window, as the samples saw them (new local ports).
func reconnectFinding(a *Analysis, p *ProcessSeries, ev Evidence) (Finding, bool) {
	span := a.End.Sub(p.FirstSeen)
	// Connections kept, or left in CLOSE_WAIT, are the leak findings',
	// not churn.
	if p.Opened < minReconnects || span <= 0 || p.Established.Verdict == Growing || p.CloseWait.Verdict == Growing {
		return Finding{}, false
	}
	brokers := 0
	for _, r := range p.Remotes {
		if r.Opened > 0 {
			brokers++
		}
	}
	every := span * time.Duration(brokers) / time.Duration(p.Opened)
	perMin := float64(p.Opened) / span.Minutes()
	f := Finding{Severity: Info, Kind: KindReconnects, Process: p.Key, Name: p.Name()}
	f.Summary = fmt.Sprintf("%s (%s) reconnects to %s every ~%s: %d connections opened in %s (%.1f/min)",
		p.Name(), p.Key, human.Plural(brokers, "broker"), human.Age(every), p.Opened, human.Age(span), perMin)
	why := "How: connections the samples saw that the sample before had not (new local ports); one opened and closed between two samples is not seen, so the rate is a floor."
	f.Details = []string{processLine(p), clientLine(ev.Client), why}
	idle, how := PeerIdleOf(a, p)
	cause := Cause{ID: "reconnects",
		Title: "The client reconnects as soon as a connection is gone: each reconnect costs a TCP and (with TLS or SASL) a handshake, a log line, and the first request waits for it.",
		Fix:   "Find who closes the connections: the broker's idle close (set the client's idle timeout below the broker's connections.max.idle.ms, so that it closes idle connections itself, or accept the churn), a load balancer in between, or errors."}
	switch {
	case every < stormEvery:
		f.Severity = Warning
		f.Summary = "Reconnect storm: " + f.Summary
		cause = Cause{ID: "reconnect-storm",
			Title: fmt.Sprintf("The client reconnects to each broker every ~%s, faster than a reconnect backoff allows a healthy client: the connections fail as soon as they are made (authentication, a broker refusing, a proxy), or clients are created per request.", human.Age(every)),
			Fix:   "Read the client's log for why each connection ends; raise its reconnect backoff (reconnect.backoff.ms and reconnect.backoff.max.ms in the Java client and librdkafka); create one client per application. A storm fills the ephemeral port range with TIME_WAIT."}
	case how != "" && every >= idle*7/10 && every <= idle*2:
		cause.Title = fmt.Sprintf("The broker closes each idle connection after ~%s (%s) and the client reconnects: one reconnect per broker per idle period.", human.Age(idle), how)
	}
	if lib := ev.Client.Catalog(); lib != nil && lib.IdleSetting != "" && cause.ID == "reconnects" {
		cause.Fix = fmt.Sprintf("Set %s below the broker's connections.max.idle.ms so that %s closes idle connections itself (it then reconnects only when it has something to send), or accept the churn.", lib.IdleSetting, lib.Name)
		cause.Rules = lib.Rules
	}
	f.Evidence = []string{fmt.Sprintf("Opened: %d connections to %s in %s, ~%s apart per broker (%s).", p.Opened, human.Plural(brokers, "broker"), human.Age(span), human.Age(every), "new local ports between samples")}
	if ev.Ports != nil {
		if line, share := portWords(ev.Ports); line != "" {
			f.Details = append(f.Details, line)
			f.Evidence = append(f.Evidence, line)
			if share >= portWarnShare && f.Severity < Warning {
				f.Severity = Warning
				f.Summary += fmt.Sprintf("; %.0f%% of the ephemeral ports toward one broker in use: connect() fails with EADDRNOTAVAIL at the range's end", 100*share)
			}
		}
	}
	f.Causes = []Cause{withText(cause)}
	return f, true
}
