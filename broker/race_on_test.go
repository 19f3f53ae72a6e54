//go:build race

package broker

// raceEnabled: this test binary runs with the race detector, whose shadow
// memory does not fit under an address-space limit.
const raceEnabled = true
