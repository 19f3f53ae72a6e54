package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Sources for the producer configuration inside Kafka Streams and Kafka
// Connect configurations (File.Source).
const (
	// SourceStreams is a Kafka Streams configuration (it sets
	// application.id): unprefixed producer configs and producer.* apply to
	// its producers (StreamsConfig.getProducerConfigs).
	SourceStreams = "streams"
	// SourceConnectWorker is a Kafka Connect worker configuration: its
	// producer.* and bootstrap.servers make the source connectors'
	// producers (Worker.baseProducerConfigs).
	SourceConnectWorker = "connect-worker"
	// SourceConnector is a connector's configuration (properties, or the
	// JSON of the REST API): its producer.override.* override the
	// worker's for that connector.
	SourceConnector = "connector"
)

// Ranks in Streams and Connect configurations: a prefixed setting beats the
// plain one.
const (
	// RankPlain: an unprefixed setting.
	RankPlain = 0
	// RankPrefixed: producer.* (Streams, worker) and producer.override.*
	// (connector).
	RankPrefixed = 1
)

// connectProducerDefaults are the settings Connect gives every source
// connector's producer before the user's (apache/kafka
// connect/runtime/.../Worker.java baseProducerConfigs, 3.9).
var connectProducerDefaults = map[string]string{
	"key.serializer":                        "org.apache.kafka.common.serialization.ByteArraySerializer",
	"value.serializer":                      "org.apache.kafka.common.serialization.ByteArraySerializer",
	"max.block.ms":                          "9223372036854775807",
	"enable.idempotence":                    "false",
	"acks":                                  "all",
	"max.in.flight.requests.per.connection": "1",
	"delivery.timeout.ms":                   "2147483647",
}

// streamsProducerDefaults are the defaults Streams gives its producers
// (StreamsConfig.PRODUCER_DEFAULT_OVERRIDES, 3.9): linger.ms 100.
var streamsProducerDefaults = map[string]string{"linger.ms": "100"}

// kafkaAppSource tells a Streams or Connect configuration by its keys:
// application.id is Streams'; connector.class a connector's; group.id with
// one of a distributed worker's storage topics, or offset.storage.file.filename
// (standalone), a worker's.
func kafkaAppSource(es []Entry) string {
	// Only the few keys that tell: a set of every key would take 52 MB
	// for a 50 MB file, at the moment the parse's peak is.
	has := map[string]bool{}
	for _, e := range es {
		switch e.Key {
		case "application.id", "connector.class", "offset.storage.file.filename", "group.id",
			"config.storage.topic", "offset.storage.topic", "status.storage.topic":
			has[e.Key] = true
		}
	}
	switch {
	case has["application.id"]:
		return SourceStreams
	case has["connector.class"]:
		return SourceConnector
	case has["offset.storage.file.filename"] || (has["group.id"] && (has["config.storage.topic"] || has["offset.storage.topic"] || has["status.storage.topic"])):
		return SourceConnectWorker
	}
	return ""
}

// mapKafkaApp turns a Streams or Connect configuration parsed as properties
// into the producer configuration it makes, in place: producer.X (Streams,
// worker) and producer.override.X (connector) set X at RankPrefixed, with
// RawKey as written. In Streams every other key stays (a plain producer
// config applies to the producer too; the others are Streams' or its other
// clients', which the rules leave alone); in Connect only the worker's
// bootstrap.servers does (Connect gives the producer no other worker
// setting: not even security.protocol). Defaults holds what Streams or
// Connect sets before the user's settings.
func mapKafkaApp(f *File, source string) {
	f.Source = source
	var out []Entry
	for _, e := range f.Entries {
		switch source {
		case SourceStreams:
			if k, ok := strings.CutPrefix(e.Key, "producer."); ok && k != "" {
				e.Key, e.Rank = k, RankPrefixed
			}
			out = append(out, e)
		case SourceConnectWorker:
			if k, ok := strings.CutPrefix(e.Key, "producer."); ok && k != "" {
				e.Key, e.Rank = k, RankPrefixed
				out = append(out, e)
			} else if e.Key == "bootstrap.servers" {
				out = append(out, e)
			}
		case SourceConnector:
			if k, ok := strings.CutPrefix(e.Key, "producer.override."); ok && k != "" {
				e.Key, e.Rank = k, RankPrefixed
				out = append(out, e)
			}
		}
	}
	f.Entries = out
	switch source {
	case SourceStreams:
		f.Defaults = streamsProducerDefaults
	case SourceConnectWorker:
		f.Defaults = connectProducerDefaults
	case SourceConnector:
		// The worker's file has bootstrap.servers and the rest.
		f.Defaults, f.Partial = connectProducerDefaults, true
	}
}

// ParseConnectorJSON reads a connector's configuration as the Connect REST
// API takes it: {"name": ..., "config": {...}} (POST /connectors) or the
// config object alone (PUT /connectors/NAME/config), string values. Its
// producer.override.* keys make the entries, as in a connector's
// properties file, with the positions of the JSON text (the key's opening
// quote, and the value's).
func ParseConnectorJSON(name, src string) (*File, error) {
	f := &File{Path: name, Dialect: Java}
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	pos := func(off int64) Pos {
		before := src[:off]
		line := strings.Count(before, "\n") + 1
		return posAt(line, utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:])+1)
	}
	// skipTo returns the offset of the next non-blank character that is not
	// a ':' or ',' at or after off: where the next token starts.
	skipTo := func(off int64) int64 {
		for int(off) < len(src) && strings.IndexByte(" \t\r\n:,", src[off]) >= 0 {
			off++
		}
		return off
	}
	var walk func(depth int, inConfig bool) error
	walk = func(depth int, inConfig bool) error {
		for dec.More() {
			kstart := skipTo(dec.InputOffset())
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			vstart := skipTo(dec.InputOffset())
			vt, err := dec.Token()
			if err != nil {
				return err
			}
			switch v := vt.(type) {
			case json.Delim:
				if v == '{' {
					if err := walk(depth+1, depth == 0 && key == "config"); err != nil {
						return err
					}
				} else if v == '[' {
					for dec.More() {
						var skip any
						if err := dec.Decode(&skip); err != nil {
							return err
						}
					}
				}
				if _, err := dec.Token(); err != nil { // the closing delimiter
					return err
				}
			default:
				if depth == 0 || inConfig {
					f.Entries = append(f.Entries, Entry{Key: key, RawKey: key, Value: jsonScalar(v),
						KeyPos: pos(kstart), ValuePos: pos(vstart)})
				}
			}
		}
		return nil
	}
	t, err := dec.Token()
	if err == nil && t != json.Delim('{') {
		err = fmt.Errorf("a connector's JSON is an object, not %v", t)
	}
	if err == nil {
		err = walk(0, false)
	}
	if err != nil && err != io.EOF {
		var se *json.SyntaxError
		if ok := asSyntax(err, &se); ok {
			return nil, fmt.Errorf("%s:%s: %v", name, pos(min(se.Offset, int64(len(src)))), err)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	// The top-level keys of {"name":..., "config":{...}} are not settings.
	if hasConfigObject(src) {
		var kept []Entry
		for _, e := range f.Entries {
			if e.KeyPos.Line > 0 && !isTopLevelMeta(e.Key) {
				kept = append(kept, e)
			}
		}
		f.Entries = kept
	}
	mapKafkaApp(f, SourceConnector)
	return f, nil
}

func isTopLevelMeta(k string) bool { return k == "name" || k == "type" || k == "tasks" }

func hasConfigObject(src string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(src), &top) != nil {
		return false
	}
	c, ok := top["config"]
	return ok && bytes.HasPrefix(bytes.TrimSpace(c), []byte("{"))
}

func asSyntax(err error, se **json.SyntaxError) bool {
	s, ok := err.(*json.SyntaxError)
	if ok {
		*se = s
	}
	return ok
}

// jsonScalar is a JSON scalar as the string Connect's config gets.
func jsonScalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		if x {
			return "true"
		}
		return "false"
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
