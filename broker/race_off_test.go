//go:build !race

package broker

// raceEnabled: this test binary runs without the race detector.
const raceEnabled = false
