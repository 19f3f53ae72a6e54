package rules

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kdiag/kdiag/config"
)

// KD4xx: types, ranges and keys, checked against the catalog.

// springDataSizeKeys are Spring Boot's typed producer settings of type
// DataSize ("16KB"), which Spring converts before the producer sees them.
var springDataSizeKeys = map[string]bool{"batch.size": true, "buffer.memory": true}

var dataSizeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d+\s*(B|KB|MB|GB|TB)?$`) })

// springTyped reports whether a Spring entry is one of Spring's own typed
// settings (spring.kafka.producer.batch-size), not a raw producer property
// (spring.kafka.producer.properties.batch.size).
func springTyped(e config.Entry) bool {
	return !strings.Contains(e.RawKey, ".properties.") && !strings.Contains(e.RawKey, ".properties[")
}

// ValueError is how a value fails its key's type or validator: the rule that
// reports it and the finding's message. kdiag lint and kdiag's producer both
// build their errors from it, so that a value is rejected in the same words
// everywhere.
type ValueError struct {
	// Rule is the lint rule that reports the value: KD401 (not of the key's
	// type), KD402 (out of range), KD403 (not an allowed value) or KD308
	// (acks).
	Rule string
	// Msg is the finding's message, starting with the key:
	// `linger.ms: "5s" is not a number of milliseconds`.
	Msg string
	// Severity is the finding's, when it is not the rule's (0): a value
	// librdkafka accepts but reads otherwise than it reads is a warning.
	Severity Severity
	// Fix is the finding's remediation when it is not the rule's.
	Fix string
}

// Error returns the finding's message.
func (e *ValueError) Error() string { return e.Msg }

// CheckJavaValue checks value for the Java producer config key as the Java
// client's ConfigDef does (parse by type, then the validator) and returns the
// problem as a *ValueError whose text is the message kdiag lint reports for
// key=value in a Java .properties file. It returns nil for a valid value and
// for a key the catalog does not have: what an unknown key means is the
// caller's to decide. Unlike lint it does not look at the Kafka version: the
// catalog has one type and validator per key.
func CheckJavaValue(key, value string) error {
	s, ok := JavaSetting(key)
	if !ok {
		return nil
	}
	// A nil *ValueError must not become a non-nil error.
	dv, _ := ParseVersion(DefaultKafkaVersion)
	if ve := checkJavaValue(config.Entry{Key: key, Value: value}, s, false, dv); ve != nil {
		return ve
	}
	return nil
}

// checkJavaValue checks a value as ConfigDef would: parse by type, then the
// validator. spring says the file is a Spring one (typed DataSize settings).
func checkJavaValue(e config.Entry, s Setting, spring bool, ver Version) *ValueError {
	val := strings.TrimSpace(e.Value)
	key := name(e)
	if spring && springTyped(e) && springDataSizeKeys[e.Key] {
		if dataSizeRE().MatchString(val) {
			return nil
		}
		return &ValueError{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not a data size (Spring takes 16384 or 16KB)", key, shown(e))}
	}
	var num float64
	isNum := false
	switch s.Type {
	case "INT", "SHORT", "LONG":
		n, err := parseJavaInt(val, intBits(s.Type))
		if err == errRange {
			return &ValueError{Rule: "KD401", Msg: fmt.Sprintf("%s: %q does not fit a %d-bit integer", key, shown(e), intBits(s.Type))}
		}
		if err != nil {
			return &ValueError{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not %s", key, shown(e), noun(e.Key))}
		}
		num, isNum = float64(n), true
	case "DOUBLE":
		f, err := parseJavaDouble(val)
		if err != nil {
			return &ValueError{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not a decimal number", key, shown(e))}
		}
		num, isNum = f, true
	case "BOOLEAN":
		if _, err := parseJavaBool(val); err != nil {
			return &ValueError{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not true or false", key, shown(e))}
		}
	case "CLASS":
		if ve := checkJavaClass(e, val, ver); ve != nil {
			return ve
		}
	}
	if isNum && (s.HasMin || s.HasMax) {
		if containsString(s.Extra, strconv.FormatFloat(num, 'f', -1, 64)) {
			return nil
		}
		if (s.HasMin && num < s.Min) || (s.HasMax && num > s.Max) {
			allowed := rangeText(s.HasMin, s.HasMax, s.Min, s.Max)
			if len(s.Extra) > 0 {
				allowed += " (or " + strings.Join(s.Extra, ", ") + ")"
			}
			return &ValueError{Rule: "KD402", Msg: fmt.Sprintf("%s: %s is out of range: the Java client requires %s", key, shownVal(e, val), allowed)}
		}
	}
	if e.Key == "acks" {
		return checkAcks(e)
	}
	if len(s.Enum) > 0 {
		ok := false
		for _, x := range s.Enum {
			if x == val || (s.EnumFold && strings.EqualFold(x, val)) {
				ok = true
			}
		}
		if !ok {
			hint := ""
			if !s.EnumFold && containsFold(s.Enum, val) {
				hint = " (values are case-sensitive)"
			}
			return &ValueError{Rule: "KD403", Msg: fmt.Sprintf("%s: %q is not one of %s%s", key, shown(e), strings.Join(s.Enum, ", "), hint)}
		}
	}
	if s.NonEmpty && val == "" {
		return &ValueError{Rule: "KD403", Msg: fmt.Sprintf("%s: an empty value is not allowed (the Java client requires a non-empty string)", key)}
	}
	return nil
}

// kafkaClassPackages are the kafka-clients packages of the classes CLASS
// configs name, and kafkaClasses those classes, with the releases that have
// them (from apache/kafka's source at each tag:
// clients/src/main/java/org/apache/kafka/common/serialization and
// clients/producer). A name in one of these packages that kafka-clients
// does not have is a typo (StringSerialiser) or the wrong kind of class
// (StringDeserializer as a serializer).
var kafkaClassPackages = []string{"org.apache.kafka.common.serialization.", "org.apache.kafka.clients.producer."}

var kafkaClasses = []struct {
	name string
	// from is the first release that has it, until the first that does
	// not ("" for none).
	from, until Version
}{
	{"org.apache.kafka.common.serialization.ByteArraySerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.ByteBufferSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.BytesSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.DoubleSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.FloatSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.IntegerSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.LongSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.ShortSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.StringSerializer", Version{2, 0}, Version{}},
	{"org.apache.kafka.common.serialization.UUIDSerializer", Version{2, 1}, Version{}},
	{"org.apache.kafka.common.serialization.VoidSerializer", Version{2, 5}, Version{}},
	{"org.apache.kafka.common.serialization.ListSerializer", Version{3, 0}, Version{}},
	{"org.apache.kafka.common.serialization.BooleanSerializer", Version{3, 5}, Version{}},
	{"org.apache.kafka.clients.producer.RoundRobinPartitioner", Version{2, 4}, Version{}},
	{"org.apache.kafka.clients.producer.UniformStickyPartitioner", Version{2, 4}, Version{4, 0}},
	{"org.apache.kafka.clients.producer.internals.DefaultPartitioner", Version{2, 0}, Version{4, 0}},
}

// kafkaClassIn reports whether kafka-clients ver has the class name, and
// the classes of its package it has.
func kafkaClassIn(name string, ver Version) (ok bool, pkgClasses []string) {
	for _, c := range kafkaClasses {
		in := ver.AtLeast(c.from.Major, c.from.Minor) && (c.until == Version{} || !ver.AtLeast(c.until.Major, c.until.Minor))
		if c.name == name {
			ok = in
		}
		if in {
			pkgClasses = append(pkgClasses, c.name)
		}
	}
	return ok, pkgClasses
}

// checkJavaClass checks a CLASS value as ConfigDef.parseType does: it loads
// the trimmed name with Class.forName, which needs the package. A name
// without one (StringSerializer) is a class of the default package, which
// no application has: the client throws ConfigException "Class ... could
// not be found". So does a name in kafka-clients' own packages that the
// release does not have. Other dotted names may be on the application's
// class path, and are not judged.
func checkJavaClass(e config.Entry, val string, ver Version) *ValueError {
	if val == "" {
		return nil
	}
	notFound := fmt.Sprintf("the client throws ConfigException \"Class %s could not be found\"", val)
	if !strings.Contains(val, ".") {
		msg := fmt.Sprintf("%s: %q is not a class the client can load: Class.forName needs the full name, and %s", name(e), shown(e), notFound)
		fix := "Write the class's full name, with its package."
		_, all := kafkaClassIn("", ver)
		for _, c := range all {
			if shortClass(c) == val {
				msg += fmt.Sprintf(" (write %s)", c)
				fix = fmt.Sprintf("Write %s=%s.", e.Key, c)
			}
		}
		return &ValueError{Rule: "KD401", Msg: msg, Fix: fix}
	}
	if !hasAnyPrefix(val, kafkaClassPackages) || containsString(removedPartitioners, val) {
		return nil // the application's; a removed partitioner is KD407's
	}
	ok, all := kafkaClassIn(val, ver)
	if ok {
		return nil
	}
	msg := fmt.Sprintf("%s: kafka-clients %s has no class %s: %s", name(e), ver, val, notFound)
	fix := "Write the name of a class the client has."
	var names []string
	for _, c := range all {
		if strings.HasPrefix(c, val[:strings.LastIndex(val, ".")+1]) || strings.HasPrefix(val, "org.apache.kafka.clients.producer.") {
			names = append(names, c)
		}
	}
	if sug := suggest(val, newNameSet(names)); sug != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", sug)
		fix = fmt.Sprintf("Write %s=%s.", e.Key, sug)
	}
	return &ValueError{Rule: "KD401", Msg: msg, Fix: fix}
}

// checkLibValue checks a value as librdkafka's rd_kafka_conf_set does
// (src/rdkafka_conf.c rd_kafka_anyconf_set_prop): an integer with
// (int)strtol(value, &end, 0), a float with strtod, failing only when
// nothing parses, then the range. What librdkafka accepts but reads
// differently from what is written is a warning: text after the number
// (ignored: "9m" is 9), an octal reading (a leading 0: "010" is 8), a number
// the int cast wraps.
func checkLibValue(e config.Entry, s LibSetting) []*ValueError {
	val := strings.TrimSpace(e.Value)
	key := name(e)
	outside := func(f float64) bool { return (s.HasMin && f < s.Min) || (s.HasMax && f > s.Max) }
	rng := rangeText(s.HasMin, s.HasMax, s.Min, s.Max)
	switch s.Type {
	case "integer":
		if (e.Key == "acks" || e.Key == "request.required.acks") && strings.EqualFold(val, "all") {
			return nil // the property's string-to-int map
		}
		r := readLibInt(val)
		if !r.ok {
			return []*ValueError{{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not %s: librdkafka fails with \"Invalid value for configuration property\"", key, shown(e), noun(e.Key))}}
		}
		var out []*ValueError
		if r.rest != "" {
			out = append(out, &ValueError{Rule: "KD401", Severity: Warning, Msg: fmt.Sprintf(
				"%s: librdkafka reads %q as %d and ignores %q after the number (strtol stops there): the setting is %d, not what %q says",
				key, shown(e), r.val, r.rest, r.val, shown(e))})
		}
		if r.base == 8 && r.long != 0 {
			if dec, err := strconv.ParseInt(strings.TrimLeft(val[:len(val)-len(r.rest)], " +-0"), 10, 64); err != nil || dec != abs64(r.long) {
				out = append(out, &ValueError{Rule: "KD401", Severity: Warning, Msg: fmt.Sprintf(
					"%s: librdkafka reads %q as octal (a leading 0 means base 8 to strtol): %d", key, shown(e), r.val)})
			}
		}
		switch {
		case outside(float64(r.val)) && r.wrapped:
			out = append(out, &ValueError{Rule: "KD402", Msg: fmt.Sprintf(
				"%s: librdkafka reads %s as %d (strtol's long is cast to int), which is not %s: it refuses the value",
				key, shownVal(e, val), r.val, rng)})
		case outside(float64(r.val)):
			out = append(out, &ValueError{Rule: "KD402", Msg: fmt.Sprintf("%s: %s is out of range: librdkafka requires %s", key, shownVal(e, val), rng)})
		case r.wrapped:
			out = append(out, &ValueError{Rule: "KD402", Severity: Warning, Msg: fmt.Sprintf(
				"%s: librdkafka reads %s as %d: strtol's long is cast to int, which wraps", key, shownVal(e, val), r.val)})
		}
		return out
	case "float":
		f, n := strtod(val)
		if n == 0 {
			return []*ValueError{{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not a number: librdkafka fails with \"Invalid value for configuration property\"", key, shown(e))}}
		}
		var out []*ValueError
		if rest := strings.TrimRight(val[n:], " \t"); rest != "" {
			out = append(out, &ValueError{Rule: "KD401", Severity: Warning, Msg: fmt.Sprintf(
				"%s: librdkafka reads %q as %s and ignores %q after the number (strtod stops there)", key, shown(e), fmtNum(f), rest)})
		}
		if outside(f) {
			out = append(out, &ValueError{Rule: "KD402", Msg: fmt.Sprintf("%s: %s is out of range: librdkafka requires %s", key, shownVal(e, val), rng)})
		}
		return out
	case "boolean":
		if _, err := parseLibBool(val); err != nil {
			return []*ValueError{{Rule: "KD401", Msg: fmt.Sprintf("%s: %q is not true or false", key, shown(e))}}
		}
	case "enum value":
		if !containsFold(s.Enum, val) {
			return []*ValueError{{Rule: "KD403", Msg: fmt.Sprintf("%s: %q is not one of %s", key, shown(e), strings.Join(s.Enum, ", "))}}
		}
	}
	return nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// shownVal is val (the trimmed value of e) as a message may print it.
func shownVal(e config.Entry, val string) string {
	if shown(e) != e.Value {
		return Redacted
	}
	return val
}

// valueRule builds KD401-KD403, which share one pass over the entries.
func valueRule(id, title, rationale, remediation string) *Rule {
	return &Rule{
		ID: id, Title: title, Severity: Error, Category: "type", PerEntry: true,
		Rationale: rationale, Remediation: remediation,
		Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/config/ConfigDef.java (parseType: Integer/Long/Short.parseX " +
			"of the trimmed value, BOOLEAN only true/false; Range.atLeast/between, ValidString.in) and the definitions in " +
			"apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java, clients/CommonClientConfigs.java, " +
			"common/config/SslConfigs.java, common/config/SaslConfigs.java; confluentinc/librdkafka src/rdkafka_conf.c " +
			"(rd_kafka_anyconf_set_prop: (int)strtol(value, &end, 0), strtod, the range check) and CONFIGURATION.md (ranges)",
		Check: func(p *Pass) {
			v := p.view
			for _, e := range p.Entries {
				if v.unknown(e) || v.shadowed(e) {
					continue // KD410, KD411; a line a later one overrides (KD409)
				}
				var vps []*ValueError
				if v.dialect == config.Librdkafka {
					if s, ok := LibrdkafkaSetting(e.Key); ok {
						vps = checkLibValue(e, s)
					}
				} else if s, ok := kdiagSettings[e.Key]; ok {
					if vp := checkJavaValue(e, s, false, v.version); vp != nil {
						if m := strings.Replace(vp.Msg, "the Java client", "kdiag produce", 1); m != vp.Msg {
							vp.Msg = m
						} else {
							vp.Msg += " (kdiag produce's own key)"
						}
						vps = []*ValueError{vp}
					}
				} else if s, ok := javaSettingAt(e.Key, v.version); ok {
					if vp := checkJavaValue(e, s, v.dialect == config.Spring, v.version); vp != nil {
						vps = []*ValueError{vp}
					}
				}
				for _, vp := range vps {
					if vp.Rule == id {
						p.reportValue(e, vp.Severity, vp.Msg, vp.Fix)
					}
				}
			}
		},
	}
}

var kd401 = valueRule("KD401", "value is not of the key's type (number, boolean, class)",
	"The Java client parses every value by its config type when the producer is created (INT and LONG with "+
		"Integer/Long.parseLong: no units, no underscores, no decimals; BOOLEAN only true or false; CLASS with "+
		"Class.forName, which needs the full name: key.serializer=StringSerializer is not found) and throws "+
		"ConfigException for a value that does not parse, so the producer does not start. \"9m\" or \"30s\" "+
		"are common mistakes: durations are plain milliseconds. librdkafka rejects such values when the "+
		"property is set.",
	"Write the value as a plain number in the key's unit (milliseconds for *.ms, bytes for *.bytes), or true/false.")

var kd402 = valueRule("KD402", "number is outside the key's allowed range",
	"Most numeric configs have a validator (atLeast(0), between(0, 2147483647), atLeast(5000) for "+
		"metadata.max.idle.ms, gzip levels 1 to 9 or -1); the Java client throws ConfigException for a value "+
		"outside it, so the producer does not start. librdkafka has a range for every numeric property and "+
		"rejects values outside it.",
	"Use a value within the range the message gives.")

var kd403 = valueRule("KD403", "value is not one of the key's allowed values",
	"Enumerated configs (compression.type, security.protocol, client.dns.lookup, metadata.recovery.strategy, "+
		"...) accept only their listed values; most Java validators are case-sensitive (compression.type=GZIP "+
		"fails), security.protocol and metadata.recovery.strategy are not. transactional.id must not be empty. "+
		"The Java client throws ConfigException; librdkafka rejects the value when it is set.",
	"Use one of the values the message lists, in the case it lists them.")

// javaEquivalents name the Java config for keys of other clients or of the
// broker that people copy into producer files.
var javaEquivalents = map[string]string{
	"metadata.broker.list": "bootstrap.servers", "queue.buffering.max.ms": "linger.ms",
	"message.timeout.ms": "delivery.timeout.ms", "sasl.mechanisms": "sasl.mechanism",
	"request.required.acks": "acks", "message.send.max.retries": "retries",
	"compression.codec": "compression.type", "queue.buffering.max.kbytes": "buffer.memory",
	"socket.send.buffer.bytes": "send.buffer.bytes", "socket.receive.buffer.bytes": "receive.buffer.bytes",
	"message.max.bytes": "max.request.size", "max.in.flight": "max.in.flight.requests.per.connection",
}

// passThroughPrefixes are keys the Java producer hands to plugins
// (serializers, interceptors, Schema Registry clients), which it rightly does
// not know.
var passThroughPrefixes = []string{"schema.registry.", "basic.auth.", "bearer.auth.", "confluent.",
	"value.subject.", "key.subject.", "auto.register.schemas", "use.latest.version", "latest.compatibility.",
	"specific.avro.", "avro.", "json.", "protobuf.", "normalize.schemas", "use.schema.id", "spring.",
	"interceptor.", "opentelemetry.", "otel.",
	// config.providers.<name>.class and .param.* configure the providers
	// config.providers names; metrics.context.* labels the metrics.
	"config.providers.", "metrics.context.", "metrics.jmx."}

var kd404 = &Rule{
	PerEntry: true,
	ID:       "KD404",
	Title:    "unknown key (did you mean ...?)",
	Severity: Warning,
	Category: "keys",
	Rationale: "The Java producer ignores keys it does not define, logging only \"These configurations '[...]' " +
		"were supplied but are not used yet.\" at INFO, so a misspelt key (connection.max.idle.ms for " +
		"connections.max.idle.ms) silently leaves the setting at its default. librdkafka is strict: " +
		"rd_kafka_conf_set fails with \"No such configuration property\" for a key its property table does not " +
		"have, such as a Java-only key (buffer.memory, key.serializer), a broker key or a plain typo (broker.list), " +
		"and refuses callbacks and sasl.jaas.config / ssl.truststore.location with messages of its own: in a " +
		"librdkafka file these are errors (warnings when plugin.library.paths names plugins, which see every name " +
		"first). kdiag knows every name of that table, global, topic (also as topic.<name>), producer and consumer " +
		"(librdkafka 2.15.0's src/rdkafka_conf.c). kdiag produce's own keys (kdiag.reader, kdiag.model, kdiag.callback.delay.ms) " +
		"are known, and their values checked as kdiag produce checks them. Keys meant for " +
		"serializers and interceptors (schema.registry.*, basic.auth.*, ...) are not reported. kdiag suggests a " +
		"catalog key within a small edit distance (Damerau-Levenshtein: 1 for short names, up to 3 for long ones).",
	Remediation: "Fix the spelling (see the suggestion), or remove the key. For a librdkafka file, use the " +
		"librdkafka property (e.g. linger.ms or queue.buffering.max.ms, not buffer.memory).",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/config/AbstractConfig.java (logUnused: \"These configurations ... were supplied but are not used yet.\"); apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (the config names); confluentinc/librdkafka src/rdkafka_conf.c (rd_kafka_properties[], rd_kafka_conf_set and rd_kafka_anyconf_set: \"No such configuration property\", the topic. prefix, _RK_C_PTR and _RK_C_INVALID entries)",
	Check: func(p *Pass) {
		v := p.view
		for _, e := range p.Entries {
			if e.Key == "" || frameworkKey(p.File, e) {
				continue
			}
			if v.dialect == config.Librdkafka {
				checkLibUnknown(p, e)
				continue
			}
			if v.dialect == config.Spring && strings.HasPrefix(e.Key, "spring.") {
				checkSpringUnknown(p, e)
				continue
			}
			if knownJavaKey(e.Key) {
				continue // KD407, KD408 handle version availability
			}
			if k, ok := cutBOM(e.Key); ok {
				// KD903 reports the mark; say what it does to the key
				// without printing it inside the name.
				p.reportKey(e, 0, fmt.Sprintf("%s, with the file's UTF-8 byte order mark before it, is not the key the client reads: "+
					"java.util.Properties keeps the mark as part of the first key, so the setting is ignored", k),
					"Save the file without a byte order mark.")
				continue
			}
			if isKdiagKey(e.Key) {
				// kdiag produce's own keys (producer/config.go), set
				// beside the Java client's in its configuration.
				if _, ok := kdiagSettings[e.Key]; ok {
					continue
				}
				msg := fmt.Sprintf("%s is not a key of kdiag produce (it reads %s)", name(e), strings.Join(KdiagKeys(), ", "))
				fix := "Remove it, or use one of the keys the message lists."
				if sug := suggest(e.Key, kdiagNames()); sug != "" {
					msg = fmt.Sprintf("%s is not a key of kdiag produce: did you mean %s?", name(e), sug)
					fix = fmt.Sprintf("Rename it to %s.", sug)
				}
				p.reportKey(e, 0, msg, fix)
				continue
			}
			if IsConsumerOnlyKey(e.Key) || IsBrokerOnlyKey(e.Key) || hasAnyPrefix(e.Key, passThroughPrefixes) {
				continue
			}
			if j, ok := scalaProducerKeys[e.Key]; ok && len(v.scala) > 0 {
				msg := fmt.Sprintf("%s is a key of the old Scala producer (removed in Kafka 2.0): the Java producer ignores it", name(e))
				fix := "Remove it: the Java producer has no such setting."
				if j != "" {
					msg += fmt.Sprintf(" (the Java config is %s)", j)
					fix = fmt.Sprintf("Use %s.", j)
				}
				p.reportKey(e, 0, msg, fix)
				continue
			}
			if j, ok := javaEquivalents[e.Key]; ok {
				p.reportKey(e, 0, fmt.Sprintf("%s is a librdkafka property: the Java producer ignores it (the Java config is %s)", name(e), j),
					fmt.Sprintf("Use %s, or lint the file with --dialect librdkafka if it is for librdkafka.", j))
				continue
			}
			if _, ok := LibrdkafkaSetting(e.Key); ok {
				p.reportKey(e, 0, fmt.Sprintf("%s is a librdkafka property the Java producer does not have: it is ignored", name(e)),
					"Remove it, or lint the file with --dialect librdkafka if it is for librdkafka.")
				continue
			}
			if sug := suggest(e.Key, javaNames()); sug != "" {
				p.reportKey(e, 0, fmt.Sprintf("%s is not a producer config: did you mean %s? The producer ignores it", name(e), sug),
					fmt.Sprintf("Rename it to %s.", sug))
				continue
			}
			p.reportKey(e, 0, fmt.Sprintf("%s is not a producer config: the producer ignores it", name(e)), "")
		}
	},
}

// cutBOM removes a byte order mark from the start of a key: U+FEFF (the
// file read as UTF-8), or its bytes read as ISO-8859-1.
func cutBOM(key string) (string, bool) {
	for _, bom := range []string{"\ufeff", "\u00ef\u00bb\u00bf"} {
		if k, ok := strings.CutPrefix(key, bom); ok {
			return k, true
		}
	}
	return key, false
}

// springTypedNames are the typed settings of Spring Boot's
// KafkaProperties.Producer (and the shared ones under spring.kafka.), in
// their canonical kebab-case form.
var springTypedNames = []string{"acks", "batch-size", "bootstrap-servers", "buffer-memory", "client-id",
	"compression-type", "key-serializer", "value-serializer", "retries", "transaction-id-prefix",
	"properties", "security.protocol", "ssl.key-password", "ssl.key-store-location", "ssl.key-store-password",
	"ssl.key-store-type", "ssl.trust-store-location", "ssl.trust-store-password", "ssl.trust-store-type",
	"ssl.protocol", "ssl.bundle"}

// checkSpringUnknown reports a spring.kafka.* key the parser could not map to
// a producer config (config maps such keys to themselves): a misspelt typed
// setting, or a producer config Spring has no typed setting for.
func checkSpringUnknown(p *Pass, e config.Entry) {
	prefix := "spring.kafka.producer."
	if !strings.HasPrefix(e.Key, prefix) {
		prefix = "spring.kafka."
	}
	rest := strings.TrimPrefix(e.Key, prefix)
	if rest == e.Key || strings.HasPrefix(e.Key, "spring.kafka.jaas.") {
		return // not under spring.kafka, or the JAAS module's options: not the producer's business
	}
	// A producer config written as a typed setting (linger-ms): Spring
	// has no such typed setting, and the properties map is the way.
	asJava := strings.ReplaceAll(strings.ToLower(rest), "-", ".")
	if _, ok := JavaSetting(asJava); ok {
		p.reportKey(e, 0, fmt.Sprintf("%s is not a Spring Boot setting: Spring has no typed setting for %s, so the producer never sees it", e.RawKey, asJava),
			fmt.Sprintf("Write spring.kafka.producer.properties.%s instead.", asJava))
		return
	}
	var cands []string
	for _, n := range springTypedNames {
		cands = append(cands, prefix+n)
	}
	if sug := suggest(e.Key, newNameSet(cands)); sug != "" {
		p.reportKey(e, 0, fmt.Sprintf("%s is not a Spring Boot Kafka setting: did you mean %s? Spring ignores it", e.RawKey, sug),
			fmt.Sprintf("Rename it to %s.", sug))
		return
	}
	if sug := suggest(asJava, javaNames()); sug != "" {
		p.reportKey(e, 0, fmt.Sprintf("%s is not a Spring Boot Kafka setting: for the producer config %s write spring.kafka.producer.properties.%s", e.RawKey, sug, sug),
			fmt.Sprintf("Write spring.kafka.producer.properties.%s instead.", sug))
		return
	}
	p.reportKey(e, 0, fmt.Sprintf("%s is not a Spring Boot Kafka producer setting: Spring ignores it", e.RawKey), "")
}

// checkLibUnknown reports a key of a librdkafka file that rd_kafka_conf_set
// refuses: a name its property table does not have ("No such configuration
// property"), a callback or internal property, and the Java names it
// catches with its own message (sasl.jaas.config, ssl.truststore.location).
func checkLibUnknown(p *Pass, e config.Entry) {
	if lp, ok := librdkafkaProperty(e.Key); ok {
		switch lp.kind {
		case "invalid":
			p.reportKey(e, Error, fmt.Sprintf("%s is a Java client config that librdkafka refuses: rd_kafka_conf_set fails with %q",
				name(e), lp.detail), libHint(e.Key))
		case "callback":
			p.reportKey(e, Error, fmt.Sprintf("%s is a callback librdkafka takes only from the application: rd_kafka_conf_set "+
				"fails with \"Property \"%s\" must be set through dedicated .._set_..() function\"", name(e), lp.name),
				"Remove it: the application sets it in code.")
		case "internal":
			p.reportKey(e, Error, fmt.Sprintf("%s is internal to librdkafka: rd_kafka_conf_set fails with \"Internal property \"%s\" not settable\"",
				name(e), lp.name), "Remove it.")
		}
		return // a property librdkafka takes (KD405 reports a consumer one)
	}
	sev, unless := Error, ""
	if _, ok := p.view.get("plugin.library.paths"); ok {
		// rd_kafka_anyconf_set offers every name to the plugins'
		// on_conf_set interceptors before its own table.
		sev, unless = Warning, ", unless a plugin of plugin.library.paths defines it"
	}
	what, fix := "a librdkafka property", "Remove it: librdkafka has no such property."
	switch _, java := JavaSetting(e.Key); {
	case java:
		what, fix = "a librdkafka property (it is a Java client config)", libHint(e.Key)
	case IsBrokerOnlyKey(e.Key):
		what, fix = "a librdkafka property (it is a broker setting)", "Remove it: it belongs in the broker's server.properties."
	case IsConsumerOnlyKey(e.Key):
		what = "a librdkafka property (it is a Java consumer config)"
	}
	msg := fmt.Sprintf("%s is not %s: rd_kafka_conf_set fails with \"No such configuration property\"%s", name(e), what, unless)
	if sug := suggest(e.Key, libNames()); sug != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", sug)
		fix = fmt.Sprintf("Rename it to %s.", sug)
	}
	p.reportKey(e, sev, msg, fix)
}

func libHint(key string) string {
	for lib, java := range javaEquivalents {
		if java == key && isLibrdkafkaKnown(lib) {
			return fmt.Sprintf("Use librdkafka's %s.", lib)
		}
	}
	return "Remove it: librdkafka has no such property."
}

// nameSet is a list of names suggestions are drawn from, with each name's
// normalized runes computed once (the search compares every unknown key of a
// file with every name).
type nameSet struct {
	names []string
	norm  [][]rune
	bags  []runeBag
}

func newNameSet(names []string) *nameSet {
	ns := &nameSet{names: names, norm: make([][]rune, len(names)), bags: make([]runeBag, len(names))}
	for i, n := range names {
		ns.norm[i] = []rune(normKey(n))
		ns.bags[i] = bagOf(ns.norm[i])
	}
	return ns
}

// runeBag counts a name's characters by class (letters, digits, '.', the
// rest): an edit changes at most one count up and one down, so the distance
// of two names is at least the larger of the surplus and the shortfall of
// one bag against the other. Comparing bags rejects most candidates before
// any distance is computed.
type runeBag [38]int16

func bagOf(rs []rune) runeBag {
	var b runeBag
	for _, r := range rs {
		switch {
		case r >= 'a' && r <= 'z':
			b[r-'a']++
		case r >= '0' && r <= '9':
			b[26+r-'0']++
		case r == '.':
			b[36]++
		default:
			b[37]++
		}
	}
	return b
}

// bagBound is a lower bound of the edit distance of two names by their
// bags; it stops counting once the bound exceeds limit.
func bagBound(a, b *runeBag, limit int) int {
	up, down := 0, 0
	for i := range a {
		if d := int(a[i]) - int(b[i]); d > 0 {
			up += d
		} else {
			down -= d
		}
		if up > limit || down > limit {
			return limit + 1
		}
	}
	return max(up, down)
}

// javaNames and libNames are the names suggestions are drawn from.
var javaNames = sync.OnceValue(func() *nameSet {
	var out []string
	for _, s := range JavaSettings() {
		out = append(out, s.Name)
	}
	return newNameSet(out)
})

var libNames = sync.OnceValue(func() *nameSet {
	var out []string
	for name := range libProps() {
		if isLibrdkafkaKnown(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return newNameSet(out)
})

// maxDistance is how far a key may be from a catalog name to be suggested:
// 1 edit for names under 10 characters, 2 under 20, 3 beyond.
func maxDistance(n int) int {
	switch {
	case n < 10:
		return 1
	case n < 20:
		return 2
	}
	return 3
}

// suggest returns the nearest name within maxDistance, comparing without case
// and treating '-' and '_' as '.' (Spring and environment-variable spellings).
// Among names at the same distance the first in sort order wins.
func suggest(key string, ns *nameSet) string {
	k := []rune(normKey(key))
	kb := bagOf(k)
	limit := maxDistance(len(key))
	best, bestD := "", limit+1
	var sc osaScratch
	for i, nr := range ns.norm {
		if abs(len(nr)-len(k)) > min(limit, bestD) || bagBound(&kb, &ns.bags[i], min(limit, bestD)) > min(limit, bestD) {
			continue // the distance is at least the length difference, and the bags' bound
		}
		// Only a distance below the best so far (or equal, for a name
		// that sorts first) can change the answer.
		d := sc.within(k, nr, min(limit, bestD))
		n := ns.names[i]
		if d < bestD || (d == bestD && d <= limit && n < best) {
			best, bestD = n, d
		}
	}
	if best == key {
		return ""
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

var keySeparators = strings.NewReplacer("-", ".", "_", ".")

func normKey(s string) string {
	return keySeparators.Replace(strings.ToLower(s))
}

// damerau is the optimal-string-alignment Damerau-Levenshtein distance:
// insertions, deletions, substitutions and transpositions of neighbours.
func damerau(a, b string) int {
	var sc osaScratch
	ra, rb := []rune(a), []rune(b)
	return sc.within(ra, rb, max(len(ra), len(rb)))
}

// osaScratch holds the rows of the distance computation, reused across
// comparisons.
type osaScratch struct{ prev2, prev, cur []int }

// within returns the optimal-string-alignment distance of a and b when it
// is at most k, and k+1 otherwise. It fills only the diagonal band of the
// table where |i-j| <= k (a cell outside it is more than k already), and
// stops at the first row whose every cell exceeds k: the distance only
// grows from there. With k at most 3 that is 7 cells a row instead of
// len(b), and most candidates are rejected within a few rows.
func (sc *osaScratch) within(a, b []rune, k int) int {
	if abs(len(a)-len(b)) > k {
		return k + 1
	}
	n := len(b) + 1
	if cap(sc.cur) < n {
		sc.prev2, sc.prev, sc.cur = make([]int, n), make([]int, n), make([]int, n)
	}
	prev2, prev, cur := sc.prev2[:n], sc.prev[:n], sc.cur[:n]
	inf := k + 1
	for j := range prev {
		prev[j] = min(j, inf)
		prev2[j] = inf
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-k), min(len(b), i+k)
		cur[0] = min(i, inf)
		if lo > 1 {
			cur[lo-1] = inf
		}
		rowMin := cur[0]
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			v = min(v, inf)
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if hi < len(b) {
			cur[hi+1] = inf
		}
		if rowMin > k {
			return inf
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], inf)
}

var kd405 = &Rule{
	PerEntry: true,
	ID:       "KD405",
	Title:    "consumer-only key in a producer configuration",
	Severity: Warning,
	Category: "keys",
	Rationale: "Consumer settings (group.id, auto.offset.reset, enable.auto.commit, fetch.*, max.poll.*, " +
		"session.timeout.ms, isolation.level, key/value.deserializer, ...) mean nothing to a producer: the Java " +
		"producer ignores them as unused, librdkafka logs \"Configuration property ... is a consumer property and " +
		"will be ignored by this producer instance\" (for the consumer properties of its table; a consumer key it " +
		"does not have is KD404's). " +
		"Their presence usually means a consumer file is used for a producer, or a shared file mixes both, so " +
		"that a setting the author believes applies does not.",
	Remediation: "Move consumer settings to the consumer's configuration.",
	Source:      "apache/kafka ConsumerConfig (keys not in ProducerConfig); confluentinc/librdkafka src/rdkafka_conf.c (_RK_CONSUMER properties; rd_kafka_anyconf_warn_deprecated: \"is a consumer property and will be ignored by this producer instance\")",
	Check: func(p *Pass) {
		if p.view.dialect == config.Librdkafka {
			// librdkafka's own table says which properties are the
			// consumer's (a name it does not have is KD404's).
			for _, e := range p.Entries {
				if lp, ok := librdkafkaProperty(e.Key); ok && lp.cp == "C" && isLibrdkafkaKnown(e.Key) {
					p.reportKey(e, 0, fmt.Sprintf("%s is a consumer setting: librdkafka logs \"Configuration property %s is a consumer "+
						"property and will be ignored by this producer instance\"", name(e), lp.name), "")
				}
			}
			return
		}
		for _, e := range p.Entries {
			if e.Key != "" && IsConsumerOnlyKey(e.Key) && !knownToDialect(p.view, e.Key) && !frameworkKey(p.File, e) {
				p.reportKey(e, 0, fmt.Sprintf("%s is a consumer setting: a producer ignores it", name(e)), "")
			}
		}
	},
}

// knownToDialect reports whether the file's client has key as a producer setting.
func knownToDialect(v *fileView, key string) bool {
	if v.dialect == config.Librdkafka {
		return isLibrdkafkaKnown(key)
	}
	return knownJavaKey(key)
}

var kd406 = &Rule{
	PerEntry: true,
	ID:       "KD406",
	Title:    "broker-only key in a producer configuration",
	Severity: Warning,
	Category: "keys",
	Rationale: "Broker settings (broker.id, listeners, advertised.listeners, log.*, num.partitions, " +
		"zookeeper.connect, socket.send.buffer.bytes, message.max.bytes, ...) belong in server.properties; a " +
		"producer ignores them. A broker key in a producer file usually means the author tuned the wrong side " +
		"(the producer's buffer is send.buffer.bytes, its request cap max.request.size).",
	Remediation: "Move the setting to the broker's server.properties, or use the producer's equivalent named in the message.",
	Source:      "apache/kafka broker configs (KafkaConfig, ServerLogConfigs, SocketServerConfigs) versus ProducerConfig",
	// librdkafka refuses a broker key it does not have: KD404's.
	Dialects: javaDialects,
	Check: func(p *Pass) {
		for _, e := range p.Entries {
			if e.Key == "" || !IsBrokerOnlyKey(e.Key) || knownToDialect(p.view, e.Key) || frameworkKey(p.File, e) {
				continue
			}
			if p.view.dialect == config.Librdkafka && strings.HasPrefix(e.Key, "log") {
				continue // librdkafka's log.queue, log.thread.name, log_level ...
			}
			msg := fmt.Sprintf("%s is a broker setting: a producer ignores it", name(e))
			fix := ""
			if j, ok := javaEquivalents[e.Key]; ok && p.view.dialect != config.Librdkafka {
				msg += fmt.Sprintf(" (the producer's setting is %s)", j)
				fix = fmt.Sprintf("Use %s, or move %s to server.properties.", j, e.Key)
			}
			p.reportKey(e, 0, msg, fix)
		}
	},
}

// removedPartitioners are the built-in partitioner classes deprecated in 3.3
// (KIP-794) and removed in 4.0.
var removedPartitioners = []string{
	"org.apache.kafka.clients.producer.internals.DefaultPartitioner",
	"org.apache.kafka.clients.producer.UniformStickyPartitioner",
}

var kd407 = &Rule{
	PerEntry: true,
	ID:       "KD407",
	Title:    "key or value removed in Kafka 4.0",
	Severity: Warning,
	Category: "keys",
	Rationale: "Kafka 4.0 removed auto.include.jmx.reporter (deprecated in 3.4, KIP-830: list " +
		"org.apache.kafka.common.metrics.JmxReporter in metric.reporters instead); a 4.x producer ignores it as " +
		"unknown. It also removed the DefaultPartitioner and UniformStickyPartitioner classes (deprecated in " +
		"3.3, KIP-794): partitioner.class naming one of them makes a 4.x producer fail to start with a " +
		"ConfigException (class not found). With --kafka-version 3.9 these are reported as deprecations.",
	Remediation: "Remove auto.include.jmx.reporter (use metric.reporters) and partitioner.class naming a removed " +
		"class (the built-in partitioner does sticky, adaptive partitioning by default).",
	Source:   "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (3.9: AUTO_INCLUDE_JMX_REPORTER_CONFIG, deprecated by KIP-830; trunk: removed) and apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/internals/DefaultPartitioner.java, UniformStickyPartitioner.java (deprecated by KIP-794 in 3.3, removed in 4.0)",
	Dialects: javaDialects,
	Check: func(p *Pass) {
		if p.File.Source == config.SourceLog {
			return // a logged config has only keys its client defines
		}
		v := p.view
		is4 := v.version.AtLeast(4, 0)
		for _, e := range p.Entries {
			if s, ok := JavaSetting(e.Key); ok && s.RemovedIn != "" {
				_, here := javaSettingAt(e.Key, v.version)
				switch {
				case is4:
					p.reportKey(e, Warning, fmt.Sprintf("%s was removed in Kafka %s: the producer ignores it", name(e), s.RemovedIn), "")
				case here:
					p.reportKey(e, Info, fmt.Sprintf("%s is deprecated and removed in Kafka %s", name(e), s.RemovedIn), "")
				}
				// Not in this older release at all: KD408's.
			}
			if e.Key == "partitioner.class" && containsString(removedPartitioners, strings.TrimSpace(e.Value)) {
				class := shortClass(strings.TrimSpace(e.Value))
				switch {
				case is4:
					p.reportValue(e, Error, fmt.Sprintf("%s: %s was removed in Kafka 4.0: the producer fails to start", name(e), class), "")
				case v.version.AtLeast(3, 3):
					p.reportValue(e, Info, fmt.Sprintf("%s: %s is deprecated and removed in Kafka 4.0", name(e), class), "")
				default:
					p.reportValue(e, Info, fmt.Sprintf("%s: %s is removed in Kafka 4.0 (deprecated from 3.3)", name(e), class), "")
				}
			}
		}
	},
}

// scalaProducerKeys are the keys of the old Scala producer
// (kafka.producer.ProducerConfig, SyncProducerConfig and
// AsyncProducerConfig of Kafka 0.8.2, and 0.7's) that the Java producer does
// not have, with the Java config that does the job ("" for none).
var scalaProducerKeys = map[string]string{
	"metadata.broker.list": "bootstrap.servers", "broker.list": "bootstrap.servers", "zk.connect": "bootstrap.servers",
	"serializer.class": "value.serializer", "key.serializer.class": "key.serializer",
	"compression.codec": "compression.type", "request.required.acks": "acks",
	"message.send.max.retries": "retries", "queue.buffering.max.ms": "linger.ms", "queue.time": "linger.ms",
	"queue.enqueue.timeout.ms": "max.block.ms", "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
	"batch.num.messages": "batch.size, in bytes", "queue.buffering.max.messages": "buffer.memory, in bytes",
	"queue.size": "buffer.memory, in bytes", "max.message.size": "max.request.size",
	"producer.type": "", "compressed.topics": "", "reconnect.interval": "", "zk.read.num.retries": "",
	"callback.handler": "", "callback.handler.props": "", "event.handler": "", "event.handler.props": "",
}

var kd412 = &Rule{
	ID:       "KD412",
	Title:    "file written for the old Scala producer (removed in Kafka 2.0)",
	Severity: Warning,
	Category: "keys",
	Rationale: "Kafka before 0.10 shipped a config/producer.properties for its Scala producer (kafka.producer.Producer: " +
		"metadata.broker.list, producer.type, serializer.class, compression.codec, request.required.acks). That " +
		"producer was deprecated in 0.10 and removed in 2.0. Today the Java producer reads such a file (kafka-console-" +
		"producer --producer.config, an application's copy of it) and ignores every key the Scala producer had and it " +
		"has not, so the settings in it, bootstrap servers included, do not apply. Many of those names are " +
		"librdkafka's too (librdkafka took them from that producer), but producer.type, serializer.class and the " +
		"like are no client's now.",
	Remediation: "Rewrite the file for the Java producer: bootstrap.servers for metadata.broker.list, value.serializer " +
		"and key.serializer for serializer.class and key.serializer.class, compression.type for compression.codec, " +
		"acks for request.required.acks, linger.ms for queue.buffering.max.ms, and drop producer.type (the Java " +
		"producer is asynchronous; wait on send()'s Future to be synchronous).",
	Source: "apache/kafka core/src/main/scala/kafka/producer/ProducerConfig.scala, SyncProducerConfig.scala and " +
		"async/AsyncProducerConfig.scala (0.8.2; removed by KAFKA-6921 in 2.0) and config/producer.properties " +
		"(0.8.2.2); apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java",
	Dialects: []config.Dialect{config.Java},
	Check: func(p *Pass) {
		v := p.view
		if len(v.scala) == 0 {
			return
		}
		var signs []string
		for _, e := range v.scala {
			if !slices.Contains(signs, e.Key) {
				signs = append(signs, e.Key)
			}
		}
		ignored := 0
		for _, e := range p.File.Entries {
			if _, ok := scalaProducerKeys[e.Key]; ok {
				ignored++
			}
		}
		p.reportKey(v.scala[0], 0, fmt.Sprintf("this file configures the old Scala producer (kafka.producer.Producer, removed in "+
			"Kafka 2.0; %s say so): the Java producer ignores its %d keys of that producer, so what they set is left at the "+
			"Java defaults", strings.Join(signs, ", "), ignored), "")
	},
}

var kd408 = &Rule{
	PerEntry: true,
	ID:       "KD408",
	Title:    "key does not exist in the selected Kafka version",
	Severity: Warning,
	Category: "keys",
	Rationale: "Some producer configs are newer than the client the file is for: metadata.recovery.rebootstrap." +
		"trigger.ms came with 4.0, the sasl.oauthbearer.assertion.* and jwt " +
		"retriever/validator configs with 4.1 (KIP-1139), transaction.two.phase.commit.enable with KIP-939. An " +
		"older client ignores them as unknown, so the behaviour they promise does not happen. The version " +
		"comes from --kafka-version (default 4.1).",
	Remediation: "Upgrade the client, or remove the key; check --kafka-version matches the client you run.",
	Source:      "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java at the tags 2.0.1 to 2.8.2, on branch 3.9 and trunk (the keys each defines: metadata.recovery.rebootstrap.trigger.ms and the sasl.oauthbearer.assertion.* configs are absent from 3.9, socket.connection.setup.timeout.ms from 2.6 and before)",
	Dialects:    javaDialects,
	Check: func(p *Pass) {
		if p.File.Source == config.SourceLog {
			return // a logged config has only keys its client defines
		}
		ver := p.view.version
		for _, e := range p.Entries {
			if e.Key == "config.providers" || !knownJavaKey(e.Key) {
				// config.providers became a ProducerConfig key in 4.0,
				// but AbstractConfig has resolved config providers for
				// every client config since 2.0 (KIP-297; 3.9
				// AbstractConfig.resolveConfigVariables): an older
				// producer uses it too, though it logs it as unused.
				continue
			}
			if _, ok := javaSettingAt(e.Key, ver); ok {
				continue
			}
			if s, ok := JavaSetting(e.Key); ok && s.RemovedIn != "" && !s.AvailableIn(ver) && ver.AtLeast(4, 0) {
				continue // removed in 4.0: KD407's
			}
			first := javaKeyHistory(e.Key)
			if fv, err := parseMajorMinor(first); err == nil && !fv.AtLeast(ver.Major, ver.Minor) {
				// An older release had it: a 2.x key gone since.
				p.reportKey(e, 0, fmt.Sprintf("%s is not a config of the Kafka %s producer (Kafka %s had it): it ignores it", name(e), ver, first), "")
				continue
			}
			if first == java3x {
				p.reportKey(e, 0, fmt.Sprintf("%s came after Kafka 2.8 (3.9 has it): a %s producer ignores it", name(e), ver), "")
				continue
			}
			p.reportKey(e, 0, fmt.Sprintf("%s exists from Kafka %s on: a %s producer ignores it", name(e), first, ver), "")
		}
	},
}

// reportLibAliases reports librdkafka properties set under more than one
// of their names (linger.ms and queue.buffering.max.ms): each
// rd_kafka_conf_set overwrites the same property, so the name set last wins
// and the others are dead lines.
func reportLibAliases(p *Pass) {
	v := p.view
	done := map[string]bool{}
	for _, s := range LibrdkafkaSettings() {
		names := withAliases([]string{s.Name})
		if len(names) < 2 || done[names[0]] {
			continue
		}
		for _, n := range names {
			done[n] = true
		}
		_, winKey, ok := v.getAny(names...)
		if !ok {
			continue
		}
		win, _ := v.get(winKey)
		for _, n := range names {
			e, set := v.get(n)
			if !set || n == winKey {
				continue
			}
			p.reportKey(e, 0, fmt.Sprintf("%s is the same librdkafka property as %s, set again on line %d, which wins: this line has no effect",
				name(e), winKey, win.KeyPos.Line), fmt.Sprintf("Keep one of %s.", strings.Join(names, " and ")))
		}
	}
}

var kd409 = &Rule{
	ID:       "KD409",
	Title:    "key set more than once (the last one wins)",
	Severity: Warning,
	Category: "keys",
	Rationale: "java.util.Properties and librdkafka keep the last value of a repeated key; the earlier lines " +
		"are dead text that a reader may take for the setting in force. Spring's documented overrides (a " +
		"spring.kafka.producer.properties.* entry over a typed setting) and repeats across YAML or #--- " +
		"documents (profiles) are not reported.",
	Remediation: "Keep one line per key: delete the lines the message names as ignored.",
	Source: "java.util.Properties.load (a later put replaces an earlier one); confluentinc/librdkafka " +
		"src/rdkafka_conf.c (each rd_kafka_conf_set of a property or its alias replaces its value)",
	Check: func(p *Pass) {
		if p.view.dialect == config.Librdkafka {
			reportLibAliases(p)
		}
		dups := p.view.duplicates()
		keys := make([]string, 0, len(dups))
		for k := range dups {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			es := dups[k]
			win := es[0]
			for _, e := range es[1:] {
				if e.Rank >= win.Rank {
					win = e
				}
			}
			for _, e := range es {
				if e == win {
					continue
				}
				p.reportKey(e, 0, fmt.Sprintf("%s is set again on line %d (%s), which wins: this line has no effect",
					name(e), win.KeyPos.Line, win.RawKey), "")
			}
		}
	},
}
