package metrics

import (
	"cmp"
	"slices"
	"strings"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
)

// The fleet's families: what doctor's diagnosis says of the node's Kafka
// clients, by kind, severity, client library and version (not by pid, so
// that a fleet's series stay few), and which client versions run, with the
// known bugs of each (clients.BugsFor).
var (
	famFinding = Family{"kdiag_finding", "gauge",
		"Kafka client processes with a finding of the diagnosis (the one engine behind kdiag doctor, watch and report), by kind, severity, client library and version, at the last scan."}
	famClientInfo = Family{"kdiag_client_info", "gauge",
		"Kafka client processes by client library and version, with the known connection and fd bugs of that version (docs/known-bugs.md; empty when none), at the last scan."}
)

// findingSeries and clientSeries are the fleet families' samples.
type findingSeries struct {
	kind, severity, library, version string
	n                                int
}

type clientSeries struct {
	library, version, bugs string
	n                      int
}

// diagnose counts, over the live processes of a, the findings of the
// diagnosis by (kind, severity, library, version) and the client versions
// with their known bugs. Only the evidence watch has (the client, the
// sockets) is weighed: doctor's threads, config and fds are not read here.
func diagnose(a *analyzer.Analysis, opts analyzer.Options) ([]findingSeries, []clientSeries) {
	findings := map[findingSeries]int{}
	infos := map[clientSeries]int{}
	for i := range a.Processes {
		p := &a.Processes[i]
		if !p.LastSeen.Equal(a.End) || p.Client.NotAClient() {
			continue
		}
		lib, version := cmp.Or(p.Client.Library, "unknown"), p.Client.Version
		if p.Client.Identified() {
			var ids []string
			for _, b := range clients.BugsFor(p.Client.Library, p.Client.Version) {
				ids = append(ids, b.ID)
			}
			infos[clientSeries{library: lib, version: version, bugs: strings.Join(ids, ",")}]++
		}
		for _, f := range analyzer.Diagnose(a, p, analyzer.Evidence{Client: p.Client, HeldClosed: -1}, opts) {
			findings[findingSeries{kind: f.Kind, severity: f.Severity.String(), library: lib, version: version}]++
		}
	}
	fs := make([]findingSeries, 0, len(findings))
	for k, n := range findings {
		k.n = n
		fs = append(fs, k)
	}
	slices.SortFunc(fs, func(x, y findingSeries) int {
		return cmp.Or(cmp.Compare(x.kind, y.kind), cmp.Compare(x.severity, y.severity), cmp.Compare(x.library, y.library), cmp.Compare(x.version, y.version))
	})
	cs := make([]clientSeries, 0, len(infos))
	for k, n := range infos {
		k.n = n
		cs = append(cs, k)
	}
	slices.SortFunc(cs, func(x, y clientSeries) int {
		return cmp.Or(cmp.Compare(x.library, y.library), cmp.Compare(x.version, y.version))
	})
	return fs, cs
}

// writeFleet writes the fleet families.
func (e *exposition) writeFleet(fs []findingSeries, cs []clientSeries) {
	for _, f := range fs {
		e.sample(famFinding, float64(f.n), "kind", f.kind, "library", f.library, "severity", f.severity, "version", f.version)
	}
	for _, c := range cs {
		e.sample(famClientInfo, float64(c.n), "known_bugs", c.bugs, "library", c.library, "version", c.version)
	}
}
