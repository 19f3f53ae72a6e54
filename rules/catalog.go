package rules

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The catalog's facts are the reference tables of ../shared/reference, copied
// into data/ so that the binary carries them; TestEmbeddedCatalogMatchesReference
// fails when the copy and the reference drift apart.
//
//go:embed data/*.tsv data/SOURCES.md
var dataFS embed.FS

// Setting is one Java producer config as ProducerConfig (and the
// CommonClientConfigs, SslConfigs and SaslConfigs it includes) defines it, from
// data/java-producer-configs.tsv.
type Setting struct {
	// Name is the config key, e.g. "connections.max.idle.ms".
	Name string
	// Type is the ConfigDef type: INT, LONG, SHORT, DOUBLE, BOOLEAN, STRING,
	// LIST, CLASS or PASSWORD.
	Type string
	// Default39 and Default4x are the defaults as the table writes them on
	// branch 3.9 and on 4.x/trunk: "(none - required)", "(n/a)" (the key does
	// not exist there), "(removed)", "null", or the value.
	Default39, Default4x string
	// Validator is the validator column as written, e.g. "atLeast(0)".
	Validator string
	// Importance is HIGH, MEDIUM or LOW.
	Importance string
	// Status is the table's status column: "active", "default changed in 4.0",
	// "new in 4.1 (KIP-1139)", "deprecated 3.4 (KIP-830); REMOVED 4.0", ...
	Status string
	// Notes is the table's free-text notes column.
	Notes string
	// Password is true for PASSWORD-type keys, whose values are never shown.
	Password bool

	// The parsed validator. HasMin/HasMax bound numbers (inclusive); Extra
	// lists values allowed outside the bounds (gzip level -1); Enum lists
	// allowed strings, compared ignoring case when EnumFold; NonEmpty rejects
	// "" (NonEmptyString).
	HasMin, HasMax bool
	Min, Max       float64
	Extra          []string
	Enum           []string
	EnumFold       bool
	NonEmpty       bool

	// AddedIn is the first release that has the key ("" for 3.9 or older);
	// RemovedIn the release that removed it ("" if present in trunk).
	AddedIn, RemovedIn string
}

// Default returns the key's default for a Kafka version: ok is false when the
// key has no default (required, null, or absent in that version).
func (s Setting) Default(v Version) (string, bool) {
	d := s.Default4x
	if !v.AtLeast(4, 0) {
		d = s.Default39
	}
	switch {
	case strings.HasPrefix(d, "(none"), d == "(n/a)", d == "(removed)", d == "null":
		return "", false
	case strings.HasPrefix(d, `""`):
		return "", true
	case strings.HasPrefix(d, "[]"):
		return "", true
	}
	// "TLSv1.3 (Java11+) / TLSv1.2": keep the first value only.
	if i := strings.Index(d, " ("); i > 0 {
		d = d[:i]
	}
	return d, true
}

// AvailableIn reports whether the key exists in the given Kafka version.
func (s Setting) AvailableIn(v Version) bool {
	if s.RemovedIn != "" {
		rv, _ := ParseVersion(s.RemovedIn)
		if v.AtLeast(rv.Major, rv.Minor) {
			return false
		}
	}
	if s.AddedIn != "" {
		av, _ := ParseVersion(s.AddedIn)
		return v.AtLeast(av.Major, av.Minor)
	}
	return true
}

// LibSetting is one librdkafka property a producer uses, from
// data/librdkafka-producer-configs.tsv (librdkafka CONFIGURATION.md).
type LibSetting struct {
	Name string
	// Scope is "global" or "topic"; CP is "*" (both) or "P" (producer).
	Scope, CP string
	// Type is "integer", "float", "boolean", "string" or "enum value".
	Type string
	// Range is as written: "0 .. 2147483647", "true, false", "none, gzip".
	Range      string
	Default    string
	Importance string
	Meaning    string
	// Sensitive is true for properties librdkafka itself redacts.
	Sensitive bool
	// AliasOf names the property this one is an alias of ("" if none).
	AliasOf string

	HasMin, HasMax bool
	Min, Max       float64
	// Enum lists the allowed values (librdkafka compares them ignoring case).
	Enum []string
}

type catalogData struct {
	java     map[string]Setting
	javaList []Setting
	lib      map[string]LibSetting
	libList  []LibSetting
}

var loadCatalog = sync.OnceValue(func() *catalogData {
	c, err := parseCatalog()
	if err != nil {
		// The data is embedded and tested; a parse error is a build defect.
		panic(err)
	}
	return c
})

func parseCatalog() (*catalogData, error) {
	c := &catalogData{java: map[string]Setting{}, lib: map[string]LibSetting{}}
	jrows, err := readTSV("data/java-producer-configs.tsv", 8)
	if err != nil {
		return nil, err
	}
	for _, r := range jrows {
		s := Setting{Name: r[0], Type: r[1], Default39: r[2], Default4x: r[3], Validator: r[4],
			Importance: r[5], Status: r[6], Notes: r[7]}
		s.Password = s.Type == "PASSWORD"
		parseJavaValidator(&s)
		parseJavaStatus(&s)
		c.java[s.Name] = s
		c.javaList = append(c.javaList, s)
	}
	lrows, err := readTSV("data/librdkafka-producer-configs.tsv", 8)
	if err != nil {
		return nil, err
	}
	for _, r := range lrows {
		s := LibSetting{Name: r[0], Scope: r[1], CP: r[2], Type: r[3], Range: r[4], Default: r[5],
			Importance: r[6], Meaning: r[7]}
		s.Sensitive = strings.Contains(s.Meaning, "SENSITIVE")
		if m := aliasRE().FindStringSubmatch(s.Meaning); m != nil {
			s.AliasOf = strings.TrimSuffix(m[1], ".")
		}
		parseLibRange(&s)
		if prev, ok := c.lib[s.Name]; ok {
			// compression.codec is both a global and a topic property; the
			// topic one also allows "inherit".
			for _, e := range s.Enum {
				if !containsFold(prev.Enum, e) {
					prev.Enum = append(prev.Enum, e)
				}
			}
			c.lib[s.Name] = prev
			continue
		}
		c.lib[s.Name] = s
		c.libList = append(c.libList, s)
	}
	sort.Slice(c.javaList, func(i, j int) bool { return c.javaList[i].Name < c.javaList[j].Name })
	sort.Slice(c.libList, func(i, j int) bool { return c.libList[i].Name < c.libList[j].Name })
	return c, nil
}

var aliasRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^Alias of ([a-z.]+)`) })

func readTSV(name string, cols int) ([][]string, error) {
	b, err := dataFS.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	for sc.Scan() {
		line++
		if line == 1 || strings.TrimSpace(sc.Text()) == "" {
			continue // header
		}
		f := strings.Split(sc.Text(), "\t")
		for len(f) < cols {
			f = append(f, "")
		}
		if len(f) > cols {
			return nil, fmt.Errorf("%s:%d: %d columns, want %d", name, line, len(f), cols)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		rows = append(rows, f)
	}
	return rows, sc.Err()
}

var (
	atLeastRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^atLeast\((-?[0-9.]+)\)$`) })
	betweenRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^between\((-?[0-9.]+),\s*(-?[0-9.]+)\)$`) })
	inRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(CaseInsensitiveValidString\.)?in\((.*)\)$`) })
	gzipRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(-?\d+),\.\.\.,(-?\d+)\] or (-?\d+)$`) })
)

func parseJavaValidator(s *Setting) {
	v := s.Validator
	switch {
	case atLeastRE().MatchString(v):
		m := atLeastRE().FindStringSubmatch(v)
		s.HasMin, s.Min = true, mustFloat(m[1])
	case betweenRE().MatchString(v):
		m := betweenRE().FindStringSubmatch(v)
		s.HasMin, s.Min = true, mustFloat(m[1])
		s.HasMax, s.Max = true, mustFloat(m[2])
	case gzipRE().MatchString(v):
		m := gzipRE().FindStringSubmatch(v)
		s.HasMin, s.Min = true, mustFloat(m[1])
		s.HasMax, s.Max = true, mustFloat(m[2])
		s.Extra = []string{m[3]}
	case inRE().MatchString(v):
		m := inRE().FindStringSubmatch(v)
		s.EnumFold = m[1] != ""
		for _, e := range strings.Split(m[2], ",") {
			s.Enum = append(s.Enum, strings.TrimSpace(e))
		}
	case v == "NonEmptyString":
		s.NonEmpty = true
	}
}

var newInRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`new in (\d+\.\w+)`) })

func parseJavaStatus(s *Setting) {
	if strings.Contains(s.Status, "REMOVED 4.0") || s.Default4x == "(removed)" {
		s.RemovedIn = "4.0"
	}
	if m := newInRE().FindStringSubmatch(s.Status); m != nil {
		s.AddedIn = m[1]
		if strings.HasSuffix(s.AddedIn, ".x") {
			s.AddedIn = strings.TrimSuffix(s.AddedIn, ".x") + ".0"
		}
	} else if s.Default39 == "(n/a)" {
		s.AddedIn = "4.0"
	}
}

var libRangeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(-?[0-9.]+) \.\. (-?[0-9.]+)$`) })

func parseLibRange(s *LibSetting) {
	switch s.Type {
	case "integer", "float":
		if m := libRangeRE().FindStringSubmatch(s.Range); m != nil {
			s.HasMin, s.Min = true, mustFloat(m[1])
			s.HasMax, s.Max = true, mustFloat(m[2])
		}
	case "enum value":
		for _, e := range strings.Split(s.Range, ",") {
			s.Enum = append(s.Enum, strings.TrimSpace(e))
		}
	}
}

func mustFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(fmt.Sprintf("catalog: bad number %q", s))
	}
	return f
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// JavaSetting looks up a Java producer config by key.
func JavaSetting(name string) (Setting, bool) {
	s, ok := loadCatalog().java[name]
	return s, ok
}

// JavaSettings returns every Java producer config, sorted by name.
func JavaSettings() []Setting {
	return append([]Setting(nil), loadCatalog().javaList...)
}

// LibrdkafkaSetting looks up a librdkafka property by name.
func LibrdkafkaSetting(name string) (LibSetting, bool) {
	s, ok := loadCatalog().lib[name]
	return s, ok
}

// LibrdkafkaSettings returns every librdkafka producer property in the
// catalog, sorted by name.
func LibrdkafkaSettings() []LibSetting {
	return append([]LibSetting(nil), loadCatalog().libList...)
}

// libProp is one entry of librdkafka's property table (src/rdkafka_conf.c
// rd_kafka_properties[], in upstream/librdkafka-properties.tsv): every name
// rd_kafka_conf_set knows. Any other name fails with "No such configuration
// property".
type libProp struct {
	name string
	// scope is "global" or "topic".
	scope string
	// cp is "C" (consumer only), "P" (producer only) or "*".
	cp string
	// kind is "set" (rd_kafka_conf_set takes a value), "alias" (of
	// detail), "callback" (only through its rd_kafka_conf_set_..._cb()),
	// "internal" (not settable) or "invalid" (refused with the message
	// detail: librdkafka's pointer to what to use instead).
	kind, detail string
}

// librdkafkaVersion is the release the property table was read from.
var librdkafkaVersion string

//go:embed upstream/librdkafka-properties.tsv
var libPropsTSV string

var libProps = sync.OnceValue(func() map[string][]libProp {
	m := map[string][]libProp{}
	for i, line := range strings.Split(libPropsTSV, "\n") {
		if v, ok := strings.CutPrefix(line, "# librdkafka "); ok {
			librdkafkaVersion, _, _ = strings.Cut(v, " ")
			continue
		}
		f := strings.Split(line, "\t")
		if i < 2 || len(f) != 5 {
			continue // the header, a blank line
		}
		p := libProp{name: f[0], scope: f[1], cp: f[2], kind: f[3], detail: f[4]}
		m[p.name] = append(m[p.name], p)
	}
	return m
})

// librdkafkaProperty finds name as rd_kafka_conf_set does: a global
// property first, then a topic property (the default topic
// configuration's), for which a "topic." prefix is also taken.
func librdkafkaProperty(name string) (libProp, bool) {
	props := libProps()
	for _, p := range props[name] {
		if p.scope == "global" {
			return p, true
		}
	}
	topic := strings.TrimPrefix(name, "topic.")
	for _, p := range props[topic] {
		if p.scope == "topic" {
			return p, true
		}
	}
	return libProp{}, false
}

// isLibrdkafkaKnown reports whether rd_kafka_conf_set takes name: a
// property of librdkafka's table (or an alias of one) that is set by
// value.
func isLibrdkafkaKnown(name string) bool {
	p, ok := librdkafkaProperty(name)
	return ok && (p.kind == "set" || p.kind == "alias")
}

// consumerOnlyKeys are consumer configs (Java ConsumerConfig, librdkafka
// "C" properties) that a producer ignores; consumerOnlyPrefixes match whole
// families of them.
var consumerOnlyKeys = map[string]bool{
	"group.id": true, "group.instance.id": true, "group.protocol": true, "group.remote.assignor": true,
	"group.protocol.type": true, "auto.offset.reset": true, "enable.auto.commit": true,
	"auto.commit.interval.ms": true, "session.timeout.ms": true, "heartbeat.interval.ms": true,
	"isolation.level": true, "key.deserializer": true, "value.deserializer": true,
	"partition.assignment.strategy": true, "check.crcs": true, "exclude.internal.topics": true,
	"allow.auto.create.topics": true, "default.api.timeout.ms": true, "enable.auto.offset.store": true,
	"enable.partition.eof": true, "queued.min.messages": true, "queued.max.messages.kbytes": true,
	"coordinator.query.interval.ms": true, "auto.commit.enable": true, "consume.callback.max.messages": true,
	"offset.store.method": true, "offset.store.path": true, "offset.store.sync.interval.ms": true,
}

var consumerOnlyPrefixes = []string{"fetch.", "max.poll.", "max.partition.fetch.", "share."}

// brokerOnlyKeys are broker (server.properties) settings that mean nothing to
// a producer.
var brokerOnlyKeys = map[string]bool{
	"broker.id": true, "node.id": true, "process.roles": true, "listeners": true,
	"advertised.listeners": true, "listener.security.protocol.map": true,
	"inter.broker.listener.name": true, "inter.broker.protocol.version": true,
	"controller.quorum.voters": true, "controller.quorum.bootstrap.servers": true,
	"controller.listener.names": true, "zookeeper.connect": true, "num.partitions": true,
	"num.network.threads": true, "num.io.threads": true, "num.recovery.threads.per.data.dir": true,
	"num.replica.fetchers": true, "default.replication.factor": true, "min.insync.replicas": true,
	"offsets.topic.replication.factor": true, "auto.create.topics.enable": true,
	"delete.topic.enable": true, "socket.request.max.bytes": true, "socket.send.buffer.bytes": true,
	"socket.receive.buffer.bytes": true, "message.max.bytes": true,
	"unclean.leader.election.enable": true, "group.initial.rebalance.delay.ms": true,
	"broker.rack": true, "metadata.log.dir": true, "authorizer.class.name": true,
	"super.users": true, "queued.max.requests": true, "background.threads": true,
}

var brokerOnlyPrefixes = []string{"log.", "zookeeper.", "replica.", "transaction.state.log.",
	"controlled.shutdown.", "offsets.", "controller.", "leader.imbalance.", "auto.leader.rebalance.",
	"quota.", "group.coordinator.", "group.consumer.", "group.share.", "metadata.log."}

func hasAnyPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// IsConsumerOnlyKey reports whether key is a consumer setting a producer ignores.
func IsConsumerOnlyKey(key string) bool {
	return consumerOnlyKeys[key] || hasAnyPrefix(key, consumerOnlyPrefixes)
}

// IsBrokerOnlyKey reports whether key is a broker (server.properties) setting.
func IsBrokerOnlyKey(key string) bool {
	return brokerOnlyKeys[key] || hasAnyPrefix(key, brokerOnlyPrefixes)
}
