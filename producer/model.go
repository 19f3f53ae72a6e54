package producer

import (
	"fmt"
	"strings"
)

// Model is the kafka-clients version whose measured network behaviour the
// producer follows (../shared/java-clients/README.md, and the differential
// test in clients/ that holds the two side by side): when it connects,
// to which nodes, with which requests and versions, and in the words of
// that version's NetworkClient log.
type Model int

const (
	// ModelJava39 is kafka-clients 3.9.0: at creation it connects to one
	// bootstrap server for METADATA (the least loaded, picked at random
	// among equals), sends INIT_PRODUCER_ID (idempotence is on by default)
	// and GET_TELEMETRY_SUBSCRIPTIONS (KIP-714); then it connects only to
	// the nodes it sends to.
	ModelJava39 Model = iota
	// ModelJava21 is kafka-clients 2.1.1: no connection at all until the
	// first send (or a metadata.max.age.ms refresh); then it connects to
	// a bootstrap server for METADATA and to the leaders it sends to. No
	// idempotence by default, no telemetry.
	ModelJava21
)

// String returns the model as kdiag.model and --model spell it.
func (m Model) String() string {
	if m == ModelJava21 {
		return "java-2.1"
	}
	return "java-3.9"
}

// Version is the kafka-clients version the model follows.
func (m Model) Version() string {
	if m == ModelJava21 {
		return "2.1.1"
	}
	return "3.9.0"
}

// ParseModel reads a kdiag.model / --model value.
func ParseModel(s string) (Model, error) {
	switch strings.TrimSpace(s) {
	case "java-3.9", "3.9", "3.9.0":
		return ModelJava39, nil
	case "java-2.1", "2.1", "2.1.1":
		return ModelJava21, nil
	}
	return ModelJava39, fmt.Errorf("%q is not a model (want java-3.9 or java-2.1)", s)
}
