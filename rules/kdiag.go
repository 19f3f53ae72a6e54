package rules

import (
	"slices"
	"sort"
	"strings"
)

// kdiagSettings are the keys kdiag's reference producer (kdiag produce,
// producer/config.go) reads on top of the Java client's, as the catalog's
// Settings: a produce configuration sets them beside the Java keys, so lint
// knows them (no KD404) and checks their values as the producer does.
// TestKdiagKeysMatchProducer holds this list against the producer's.
var kdiagSettings = map[string]Setting{
	// Reader: poll (Java's network thread) or on-demand (Sarama, franz-go,
	// kafka-go); ParseReaderMode also takes "ondemand".
	"kdiag.reader": {Name: "kdiag.reader", Type: "STRING", Default39: "poll", Default4x: "poll",
		Validator: "in(poll, on-demand, ondemand)", Enum: []string{"poll", "on-demand", "ondemand"}},
	// Model: which kafka-clients release's network behaviour the producer
	// follows (producer.ParseModel takes the release numbers too).
	"kdiag.model": {Name: "kdiag.model", Type: "STRING", Default39: "java-3.9", Default4x: "java-3.9",
		Validator: "in(java-3.9, java-2.1, 3.9, 3.9.0, 2.1, 2.1.1)", Enum: []string{"java-3.9", "java-2.1", "3.9", "3.9.0", "2.1", "2.1.1"}},
	// Every send callback sleeps this long on the network goroutine.
	"kdiag.callback.delay.ms": {Name: "kdiag.callback.delay.ms", Type: "LONG", Default39: "0", Default4x: "0",
		Validator: "atLeast(0)", HasMin: true},
}

// KdiagKeys returns the kdiag.* keys lint knows, sorted.
func KdiagKeys() []string {
	ks := make([]string, 0, len(kdiagSettings))
	for k := range kdiagSettings {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// isKdiagKey reports a key of kdiag's own namespace.
func isKdiagKey(key string) bool { return strings.HasPrefix(key, "kdiag.") }

// kdiagNames is what a misspelt kdiag.* key is matched against.
func kdiagNames() *nameSet { return newNameSet(slices.Sorted(slices.Values(KdiagKeys()))) }
