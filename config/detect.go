package config

import (
	"path/filepath"
	"strings"
)

// Detect picks the dialect of a file from its name, then its content:
//   - application*.properties, and any *.yml / *.yaml: Spring;
//   - a name containing "rdkafka" (librdkafka.conf, rdkafka.properties): librdkafka;
//   - otherwise, a key under spring.kafka. (or a YAML top-level "spring:"
//     mapping): Spring;
//   - otherwise by the weight of the keys: librdkafka when the file has more
//     keys only librdkafka has (LibrdkafkaOnlyKeys) than keys only the Java
//     client has (JavaOnlyKeys), so that a Java file with one librdkafka key
//     stays a Java file, and that key is reported as the Java client's
//     unknown key;
//   - a key only the old Scala producer had (ScalaProducerOnlyKeys:
//     producer.type, serializer.class, ...): Java, whose producer is what
//     reads such a file today (Kafka's own tools since 2.0), though its
//     other keys (metadata.broker.list, compression.codec) are librdkafka's
//     names too: librdkafka took them from that producer;
//   - otherwise Java.
//
// Detect never fails: what it cannot tell is Java, the common case.
func Detect(name string, data []byte) Dialect {
	if d, ok := detectByName(name, string(data)); ok {
		return d
	}
	f := &File{}
	parsePropertiesInto(f, string(data))
	return detectByKeys(f.Entries)
}

// detectByName is the part of Detect that needs no parse: the name, and a
// top-level "spring:" line.
func detectByName(name string, data string) (Dialect, bool) {
	base := strings.ToLower(filepath.Base(name))
	ext := filepath.Ext(base)
	switch {
	case ext == ".yml" || ext == ".yaml":
		return Spring, true
	case strings.HasPrefix(base, "application") && ext == ".properties":
		return Spring, true
	case strings.Contains(base, "rdkafka"):
		return Librdkafka, true
	}
	if looksLikeSpringYAML(data) {
		return Spring, true
	}
	return Unknown, false
}

// detectByKeys weighs a properties file's keys.
func detectByKeys(es []Entry) Dialect {
	rd, java := 0, 0
	for _, e := range es {
		if strings.HasPrefix(e.Key, "spring.kafka.") {
			return Spring
		}
		if scalaOnly[e.Key] {
			return Java
		}
		if librdkafkaOnly[e.Key] {
			rd++
		}
		if javaOnly[e.Key] {
			java++
		}
	}
	if rd > java {
		return Librdkafka
	}
	return Java
}

// isYAML tells whether a Spring file is YAML: by extension, and for other
// names (standard input) by content.
func isYAML(name string, data string) bool {
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
func looksLikeSpringYAML(data string) bool {
	for len(data) > 0 {
		line := data
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = ""
		}
		line = strings.TrimRight(line, " \t\r")
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

// JavaOnlyKeys lists the Java producer configs that librdkafka does not
// have: the counterweight of LibrdkafkaOnlyKeys in Detect. It is
// ../shared/reference/java-producer-configs.tsv minus
// librdkafka-producer-configs.tsv, without the sasl.oauthbearer.* and
// sasl.kerberos.* families, ssl.cipher.suites,
// ssl.endpoint.identification.algorithm, enable.metrics.push and client.rack,
// which librdkafka has too under the same names (CONFIGURATION.md;
// TestJavaOnlyKeysMatchReference checks it).
var JavaOnlyKeys = []string{
	"auto.include.jmx.reporter", "buffer.memory", "compression.gzip.level", "compression.lz4.level",
	"compression.zstd.level", "config.providers", "interceptor.classes", "key.serializer", "max.block.ms",
	"max.request.size", "metadata.max.idle.ms", "metric.reporters", "metrics.num.samples",
	"metrics.recording.level", "metrics.sample.window.ms", "partitioner.adaptive.partitioning.enable",
	"partitioner.availability.timeout.ms", "partitioner.class", "partitioner.ignore.keys",
	"receive.buffer.bytes", "sasl.client.callback.handler.class", "sasl.jaas.config",
	"sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms",
	"sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
	"sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms",
	"sasl.login.retry.backoff.ms", "security.providers", "send.buffer.bytes",
	"socket.connection.setup.timeout.max.ms", "ssl.enabled.protocols", "ssl.engine.factory.class",
	"ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.type",
	"ssl.protocol", "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
	"ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
	"transaction.two.phase.commit.enable", "value.serializer",
}

var javaOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range JavaOnlyKeys {
		m[k] = true
	}
	return m
}()

// ScalaProducerOnlyKeys are keys of the old Scala producer
// (kafka.producer.Producer of Kafka 0.7 to 1.1, removed in 2.0: its
// ProducerConfig, SyncProducerConfig and AsyncProducerConfig) that neither
// the Java producer nor librdkafka has: the sign of a file written for it,
// such as apache/kafka's config/producer.properties before 0.10.
var ScalaProducerOnlyKeys = []string{
	"broker.list", "callback.handler", "compressed.topics", "event.handler", "key.serializer.class",
	"max.message.size", "producer.type", "queue.enqueue.timeout.ms", "queue.size", "queue.time",
	"reconnect.interval", "serializer.class", "zk.connect", "zk.read.num.retries",
}

var scalaOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range ScalaProducerOnlyKeys {
		m[k] = true
	}
	return m
}()
