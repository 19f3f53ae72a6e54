package config

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strings"
)

// Detect picks the dialect of a file from its name, then its content:
//   - application*.properties, and any *.yml / *.yaml: Spring;
//   - a name containing "rdkafka" (librdkafka.conf, rdkafka.properties): librdkafka;
//   - otherwise, a key under spring.kafka. (or a YAML top-level "spring:"
//     mapping): Spring;
//   - a key only librdkafka has (LibrdkafkaOnlyKeys): librdkafka;
//   - otherwise Java.
//
// Detect never fails: what it cannot tell is Java, the common case.
func Detect(name string, data []byte) Dialect {
	base := strings.ToLower(filepath.Base(name))
	ext := filepath.Ext(base)
	switch {
	case ext == ".yml" || ext == ".yaml":
		return Spring
	case strings.HasPrefix(base, "application") && ext == ".properties":
		return Spring
	case strings.Contains(base, "rdkafka"):
		return Librdkafka
	}
	if looksLikeSpringYAML(data) {
		return Spring
	}
	f := &File{}
	parsePropertiesInto(f, data)
	rd := false
	for _, e := range f.Entries {
		if strings.HasPrefix(e.Key, "spring.kafka.") {
			return Spring
		}
		if librdkafkaOnly[e.Key] {
			rd = true
		}
	}
	if rd {
		return Librdkafka
	}
	return Java
}

// isYAML tells whether a Spring file is YAML: by extension, and for other
// names (standard input) by content.
func isYAML(name string, data []byte) bool {
	ext := strings.ToLower(filepath.Ext(name))
	switch ext {
	case ".yml", ".yaml":
		return true
	case ".properties":
		return false
	}
	return looksLikeSpringYAML(data)
}

// looksLikeSpringYAML reports whether data has a top-level "spring:" line
// with nothing after the colon but a comment: in a .properties file that
// line would set the key "spring" to "", which no one writes.
func looksLikeSpringYAML(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "spring:" || strings.HasPrefix(line, "spring: #") {
			return true
		}
	}
	return false
}

// LibrdkafkaOnlyKeys lists the producer properties of librdkafka that the
// Java producer does not have: the signal Detect uses for a librdkafka file.
// It is ../shared/reference/librdkafka-producer-configs.tsv minus
// java-producer-configs.tsv (TestLibrdkafkaOnlyKeysMatchReference checks
// it), without message.max.bytes and socket.{send,receive}.buffer.bytes,
// which are also Kafka broker settings and so no sign of librdkafka, plus
// "debug", librdkafka's global debug-contexts property (CONFIGURATION.md).
var LibrdkafkaOnlyKeys = []string{
	"api.version.fallback.ms", "api.version.request", "batch.num.messages",
	"broker.address.family", "broker.address.ttl", "broker.version.fallback",
	"compression.codec", "compression.level", "debug", "delivery.report.only.error",
	"enable.gapless.guarantee", "log.connection.close", "max.in.flight",
	"message.send.max.retries", "message.timeout.ms", "metadata.broker.list",
	"partitioner", "produce.offset.report", "queue.buffering.backpressure.threshold",
	"queue.buffering.max.kbytes", "queue.buffering.max.messages", "queue.buffering.max.ms",
	"queuing.strategy", "reconnect.backoff.jitter.ms", "request.required.acks",
	"sasl.mechanisms", "sasl.oauthbearer.assertion.private.key.pem",
	"sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "sasl.password",
	"sasl.username", "socket.blocking.max.ms", "socket.keepalive.enable",
	"socket.max.fails", "socket.nagle.disable", "socket.timeout.ms", "ssl.ca.pem",
	"ssl.key.location", "ssl.key.pem", "statistics.interval.ms",
	"sticky.partitioning.linger.ms", "topic.metadata.propagation.max.ms",
	"topic.metadata.refresh.fast.cnt", "topic.metadata.refresh.fast.interval.ms",
	"topic.metadata.refresh.interval.ms", "topic.metadata.refresh.sparse",
}

var librdkafkaOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range LibrdkafkaOnlyKeys {
		m[k] = true
	}
	return m
}()
