// Package rules is kdiag's config linter: a catalog of the Java producer's
// and librdkafka's settings, and rules (as data) that find connection risks
// and the mistakes the Java client would reject or silently override.
//
// A Rule is a value; everything that describes a rule (kdiag rules, kdiag
// rules explain, SARIF tool.driver.rules, docs/rules.md) is generated from it.
package rules

import (
	"fmt"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// Severity is how bad a finding is.
type Severity int

// Severities, ordered: a --fail-on threshold compares with >=.
const (
	Info Severity = iota + 1
	Warning
	Error
)

// String returns "info", "warning" or "error".
func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ParseSeverity reads "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(s) {
	case "info", "note":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

// Rule is one lint rule. ID is "KD" and three digits, unique in the catalog.
type Rule struct {
	ID       string
	Title    string
	Severity Severity
	// Category groups rules in docs: "connection", "bootstrap", "crossfield",
	// "type", "keys", "secrets", "suppression".
	Category    string
	Rationale   string
	Remediation string
	// Source names the fact the rule rests on, where a user can read it:
	// the upstream source file and symbol (apache/kafka's ProducerConfig.java,
	// confluentinc/librdkafka's rdkafka_conf.c or CONFIGURATION.md), never
	// a path of kdiag's own checkout.
	Source string
	// Dialects the rule applies to; nil means every dialect.
	Dialects []config.Dialect
	// Check inspects one file and reports findings through the pass.
	Check func(*Pass)
	// PerEntry says Check looks at each entry on its own (with the file's
	// view for context) and reports findings only at the entries of
	// Pass.Entries: the engine then runs it on the file's entries a chunk
	// at a time and writes those findings out before the next chunk, so
	// that a file of a million entries is not held as a million findings.
	// A rule that is not PerEntry runs once with every entry.
	PerEntry bool
}

// Finding is one problem found in one file: the single record every output
// format (text, json, sarif) is written from.
type Finding struct {
	RuleID   string     `json:"rule"`
	Severity Severity   `json:"severity"`
	Message  string     `json:"message"`
	Path     string     `json:"path"`
	Pos      config.Pos `json:"pos"`
	// Key is the config key concerned, "" for file-level findings.
	Key string `json:"key,omitempty"`
	// Evidence is the offending text with secrets redacted; never a password.
	Evidence string `json:"evidence,omitempty"`
	// Fix is the remediation for this occurrence (may be more specific than
	// the rule's).
	Fix string `json:"fix,omitempty"`
}

// Options are the settings a lint run applies to every file.
type Options struct {
	// KafkaVersion selects version-dependent defaults and checks: "3.9",
	// "4.0", "4.1", or "4.x" (the newest the catalog knows, 4.1); see
	// ParseVersion. "" means DefaultKafkaVersion, "4.1".
	KafkaVersion string
	// BrokerIdleMS is the broker's connections.max.idle.ms (default 600000,
	// or from --broker-config / --broker-idle-ms).
	BrokerIdleMS int64
	// BrokerIdleExplicit says BrokerIdleMS was given (--broker-idle-ms,
	// --broker-config): it then wins over a broker the file itself
	// describes (a compose file's broker container).
	BrokerIdleExplicit bool
	// HoldsFIN says the client the configuration is for does not read a
	// broker's FIN on an idle connection: it reads only while a response
	// is pending (Sarama, franz-go, kafka-go), or its network thread is
	// seen blocked. A caller that has identified the client (kdiag doctor)
	// sets it; lint alone assumes the dialect's client, the Java client or
	// librdkafka, which read every socket. KD102 then says the broker's
	// idle close leaves CLOSE_WAIT, not reconnects.
	HoldsFIN bool
	// Env holds environment variables to resolve placeholders with
	// (--env FILE): Spring's ${NAME} and ${NAME:default}, the Java
	// client's ${env:NAME} of a declared EnvVarConfigProvider, and ${NAME}
	// a template tool fills in. Nil resolves none: such values come at
	// run time.
	Env map[string]string
}

// Pass is what a rule's Check sees of one file, and how it reports.
type Pass struct {
	File *config.File
	// Entries are the entries to check: all of File.Entries, or for a
	// PerEntry rule one chunk of them.
	Entries []config.Entry
	Options Options
	// Report records a finding.
	Report func(Finding)

	// view is the engine's reading of File (effective values, defaults for
	// the selected version), shared by the rules of one LintFile call.
	view *fileView
}
