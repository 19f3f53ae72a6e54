// Package config reads Kafka producer configuration files into positioned
// key/value entries: Java client .properties, librdkafka properties, and
// Spring Boot application.properties / application.yml. It only parses; what
// the keys mean is the business of package rules (lint) and producer.
package config

import "fmt"

// Dialect is the kind of configuration a file holds.
type Dialect int

// Dialects.
const (
	// Unknown means the dialect is to be detected.
	Unknown Dialect = iota
	// Java is a Java client .properties file (producer.properties).
	Java
	// Librdkafka is a librdkafka properties file (same syntax, its own keys).
	Librdkafka
	// Spring is a Spring Boot application.properties or application.yml.
	Spring
)

// String returns the dialect's flag name: java, librdkafka, spring.
func (d Dialect) String() string {
	switch d {
	case Java:
		return "java"
	case Librdkafka:
		return "librdkafka"
	case Spring:
		return "spring"
	}
	return "unknown"
}

// ParseDialect reads a --dialect value.
func ParseDialect(s string) (Dialect, error) {
	switch s {
	case "java":
		return Java, nil
	case "librdkafka":
		return Librdkafka, nil
	case "spring":
		return Spring, nil
	case "", "auto":
		return Unknown, nil
	}
	return Unknown, fmt.Errorf("unknown dialect %q (want java, librdkafka or spring)", s)
}

// Pos is a 1-based line and column (columns count runes) in a file.
//
// Its fields are int32, not int: a large file has a million entries, each
// with two positions (16 bytes of 112 an entry saved; see BENCHMARKS.md,
// kdiag lint).
type Pos struct {
	Line int32 `json:"line"`
	Col  int32 `json:"column"`
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Entry is one key/value setting as written in a file.
type Entry struct {
	// Key is the producer config key the entry sets (for Spring, the key it
	// maps to: spring.kafka.producer.batch-size sets batch.size).
	Key string `json:"key"`
	// RawKey is the key as written, after unescaping (for YAML, the dotted
	// path to the value).
	RawKey string `json:"raw_key"`
	// Value is the value after unescaping and line joining.
	Value string `json:"value"`
	// RawValue is the value as written when the producer sees another one
	// (Spring converts batch-size "16KB" to 16384 and YAML 1.1 "yes" to
	// true); empty when Value is what was written.
	RawValue string `json:"raw_value,omitempty"`
	// KeyPos and ValuePos point at the first character of the key and value
	// as written (for a continued value, where it starts).
	KeyPos   Pos `json:"key_pos"`
	ValuePos Pos `json:"value_pos"`
	// Doc is the YAML document index (0 for properties files).
	Doc int32 `json:"doc,omitempty"`
	// Rank orders entries for the same Key by precedence (Spring: typed
	// settings < spring.kafka.properties.* < spring.kafka.producer.properties.*);
	// among equal ranks the later entry wins.
	Rank int32 `json:"rank,omitempty"`
}

// Comment is a comment line (properties: # or !, YAML: #), for suppressions.
type Comment struct {
	Text string `json:"text"` // without the comment marker
	Pos  Pos    `json:"pos"`
}

// Problem is a syntax problem the parser recovered from (it keeps going).
type Problem struct {
	Pos Pos    `json:"pos"`
	Msg string `json:"msg"`
	// Note says the problem is kdiag's, not the client's: the
	// configuration is read right, but something about the report is
	// less than exact (positions only at a value's start).
	Note bool `json:"note,omitempty"`
	// Warning says the client reads the file without complaint, but
	// the text looks like a mistake (a line continuation at the end of
	// the file, which java.util.Properties drops; a byte order mark,
	// which it keeps in the first key).
	Warning bool `json:"warning,omitempty"`
}

// File is a parsed configuration file.
type File struct {
	Path    string  `json:"path"`
	Dialect Dialect `json:"-"`
	// Source says where in the file the configuration was found when it is
	// not the file itself: SourceLog for a ProducerConfig block of a log,
	// and the other Source* constants. "" is a configuration file.
	Source string `json:"source,omitempty"`
	// Origin is where findings about the configuration as a whole (a key
	// it lacks) are reported: its first line, 1:1 for a whole file (the
	// zero Pos means 1:1), the header line of a log block.
	Origin Pos `json:"origin,omitzero"`
	// KafkaVersion is the Java client version the file says it comes
	// from (a log's "Kafka version:" line), "" when it does not say.
	KafkaVersion string `json:"kafka_version,omitempty"`
	// Defaults are the values the application framework sets before the
	// user's (Kafka Connect's producer settings, Streams' linger.ms): they
	// take the place of the client's defaults.
	Defaults map[string]string `json:"defaults,omitempty"`
	// Partial says the file is only part of a client's configuration (a
	// connector's overrides, whose worker has the rest): what it lacks is
	// not missing.
	Partial bool `json:"partial,omitempty"`
	// BrokerIdleMS is the broker's connections.max.idle.ms where the file
	// says it (a Kafka broker container in the same compose file), 0 when
	// it does not.
	BrokerIdleMS int64 `json:"broker_idle_ms,omitempty"`
	// DocProfiles are the profile conditions of a Spring file's documents
	// (spring.config.activate.on-profile), ActiveProfiles the
	// spring.profiles.active it writes: see ForProfiles.
	DocProfiles    []DocProfile           `json:"doc_profiles,omitempty"`
	ActiveProfiles []ActiveProfileSetting `json:"active_profiles,omitempty"`
	// Profile names the Spring profiles a File made by ForProfiles has
	// active ("default" when none is), "" for a file read as a whole.
	Profile  string    `json:"profile,omitempty"`
	Entries  []Entry   `json:"entries"`
	Comments []Comment `json:"comments,omitempty"`
	Problems []Problem `json:"problems,omitempty"`
}

// posAt is the Pos of a line and column counted in ints, as the parsers
// and the YAML library count them.
func posAt(line, col int) Pos { return Pos{Line: int32(line), Col: int32(col)} }
