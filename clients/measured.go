package clients

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// measured.json is what each real client did under `kdiag repro -- CMD`:
// clients/repro_test.go runs every client of the clients test that way
// and checks its verdict against this file, which `go test ./clients/ -run
// TestRepro -update-measured` rewrites from the verdicts. The catalog's
// measured rows of those clients are read from it (reproMeasured), and
// docs/clients.md from the catalog: measured, not typed.
//
//go:embed measured.json
var measuredJSON []byte

// MeasuredFile is measured.json's path in the repository.
const MeasuredFile = "clients/measured.json"

// ReproMeasurement is one client's verdict under kdiag repro -- CMD, in the
// words that do not change from run to run (no times): the status and what
// the client did with the connections the broker closed.
type ReproMeasurement struct {
	// Library is a catalog ID, Version as kdiag identified it.
	Library string `json:"library"`
	Version string `json:"version"`
	// Setup is how the client was configured, "" for its defaults.
	Setup string `json:"setup"`
	// Blocked says the setup blocks the client's network thread (a
	// send callback that sleeps).
	Blocked bool `json:"blocked,omitempty"`
	// Status is kdiag repro's: OK or HELD.
	Status string `json:"status"`
	// Result says what it did with the broker's close.
	Result string `json:"result"`
	// Command is the program run, as the test runs it.
	Command string `json:"command"`
}

// Key names a measurement among the others: library, version and setup.
func (m ReproMeasurement) Key() string { return m.Library + " " + m.Version + " " + m.Setup }

var measured = sync.OnceValues(func() ([]ReproMeasurement, error) {
	var ms []ReproMeasurement
	if err := json.Unmarshal(measuredJSON, &ms); err != nil {
		return nil, fmt.Errorf("%s: %w", MeasuredFile, err)
	}
	return ms, nil
})

// ReproMeasurements returns measured.json's entries, in its order (sorted
// by Key).
func ReproMeasurements() ([]ReproMeasurement, error) {
	ms, err := measured()
	return slices.Clone(ms), err
}

// reproHow is how a measurement of measured.json was made.
func reproHow(m ReproMeasurement) string {
	return fmt.Sprintf("kdiag repro --brokers 1 -- %s (clients/repro_test.go: TestRepro, at every run)", m.Command)
}

// reproMeasured is the catalog's measured rows of library id from
// measured.json. A file that does not parse gives none (TestCatalog and
// TestReproMeasuredFile say why).
func reproMeasured(id string) []Measurement {
	ms, err := measured()
	if err != nil {
		return nil
	}
	var out []Measurement
	for _, m := range ms {
		if m.Library != id {
			continue
		}
		out = append(out, Measurement{Version: m.Version, Setup: m.Setup, HoldsCloseWait: m.Status == "HELD", Blocked: m.Blocked,
			Result: strings.TrimSpace(m.Result), How: reproHow(m)})
	}
	return out
}
