package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Ranks of Spring Boot settings, in the order KafkaProperties applies them
// (spring-projects/spring-boot, spring-boot-autoconfigure,
// org/springframework/boot/autoconfigure/kafka/KafkaProperties.java,
// Spring Boot 3.x): buildProducerProperties() starts from
// buildCommonProperties() (bootstrap-servers, client-id, ssl.*, security.*,
// then spring.kafka.properties.* over them) and puts all of
// Producer.buildProperties() over that (the typed producer settings, its
// ssl.* and security.*, then spring.kafka.producer.properties.* over them).
//
// So a typed spring.kafka.producer.* setting beats spring.kafka.properties.*
// for the same key: the shared map only beats the shared typed settings.
const (
	// RankSpringCommon: spring.kafka.bootstrap-servers, client-id, ssl.*, security.protocol.
	RankSpringCommon = iota
	// RankSpringProperties: spring.kafka.properties.*.
	RankSpringProperties
	// RankSpringProducer: the typed spring.kafka.producer.* settings, its ssl.* and security.protocol.
	RankSpringProducer
	// RankSpringProducerProperties: spring.kafka.producer.properties.*.
	RankSpringProducerProperties
)

// springProducerKeys maps the typed settings of KafkaProperties.Producer, in
// Spring's uniform form (lower case, no - or _), to the producer configs
// Producer.buildProperties() puts them in. transaction-id-prefix is not in
// that map: DefaultKafkaProducerFactory sets transactional.id to the prefix
// plus a counter, so it is mapped to transactional.id with the prefix as
// its value, which is what the checks on transactional.id need.
var springProducerKeys = map[string]string{
	"acks":                "acks",
	"batchsize":           "batch.size",
	"bootstrapservers":    "bootstrap.servers",
	"buffermemory":        "buffer.memory",
	"clientid":            "client.id",
	"compressiontype":     "compression.type",
	"keyserializer":       "key.serializer",
	"valueserializer":     "value.serializer",
	"retries":             "retries",
	"transactionidprefix": "transactional.id",
}

// springDataSizeKeys are typed as DataSize in Spring Boot 2.x and later: the
// value may carry a unit (16KB) that Spring converts to bytes.
var springDataSizeKeys = map[string]bool{"batch.size": true, "buffer.memory": true}

// springSSLKeys maps KafkaProperties.Ssl (shared and per client) to the
// SslConfigs keys of Ssl.buildProperties(). "bundle" names a Spring SSL
// bundle and sets no producer key itself.
var springSSLKeys = map[string]string{
	"keypassword":              "ssl.key.password",
	"keystorecertificatechain": "ssl.keystore.certificate.chain",
	"keystorekey":              "ssl.keystore.key",
	"keystorelocation":         "ssl.keystore.location",
	"keystorepassword":         "ssl.keystore.password",
	"keystoretype":             "ssl.keystore.type",
	"truststorecertificates":   "ssl.truststore.certificates",
	"truststorelocation":       "ssl.truststore.location",
	"truststorepassword":       "ssl.truststore.password",
	"truststoretype":           "ssl.truststore.type",
	"protocol":                 "ssl.protocol",
}

// springOtherGroups are the spring.kafka.* groups that configure something
// other than the producer (or Spring itself): they set no producer key.
var springOtherGroups = map[string]bool{
	"consumer": true, "admin": true, "streams": true, "listener": true,
	"jaas": true, "template": true, "retry": true,
}

// springElem is one element of a Spring property name: a.b[c.d] has a, b
// and the bracketed c.d.
type springElem struct {
	name    string
	bracket bool
}

// springItem is one flattened Spring property as written, before mapping.
type springItem struct {
	elems    []springElem
	raw      string
	value    string
	rawValue string
	keyPos   Pos
	valuePos Pos
	doc      int
}

// ParseSpringProperties reads a Spring Boot application.properties (Java
// properties syntax, see ParseProperties, with Spring's "#---" document
// separators) and maps its spring.kafka settings onto producer configs.
//
// The mapping, from Spring Boot's KafkaProperties:
//   - spring.kafka.bootstrap-servers and spring.kafka.producer.bootstrap-servers
//     set bootstrap.servers (the producer's wins, see the Rank constants);
//     an indexed list (bootstrap-servers[0], [1]) is joined with commas;
//   - the typed spring.kafka.producer.* settings (acks, batch-size,
//     buffer-memory, client-id, compression-type, key-serializer,
//     value-serializer, retries, transaction-id-prefix), spring.kafka.ssl.*,
//     spring.kafka.producer.ssl.*, spring.kafka.security.protocol and
//     spring.kafka.producer.security.protocol set their producer keys, with
//     relaxed binding (batch-size, batchSize, batch_size); a DataSize value
//     with a unit (16KB) becomes bytes, the written form kept in RawValue;
//   - spring.kafka.properties.* and spring.kafka.producer.properties.* set
//     the key that follows, also in the bracket form
//     spring.kafka.properties[connections.max.idle.ms]. Outside brackets
//     Spring drops every character of a map key other than letters, digits,
//     "-" and "." (Spring Boot reference, "Binding Maps"), and so does this.
//
// Spring Boot reads application.properties with its own loader
// (org.springframework.boot.env.OriginTrackedPropertiesLoader), close to
// Properties.load but not the same, and this parser follows Java's:
//   - Spring reads the file as ISO-8859-1; here it is UTF-8 (see
//     ParseProperties), so a non-ASCII character written unescaped reads
//     as one character here and as two or three in Spring;
//   - Spring continues a line only at a backslash before \n (before \r\n it
//     keeps a CR in the value), and ignores an empty key;
//   - a #--- comment right after another # comment line does not start a
//     document in Spring; here every #--- at the start of a line does.
//
// Placeholders such as ${KAFKA_BROKERS:localhost:9092} are kept as
// written: Spring resolves them from the environment at run time.
//
// Keys outside spring.kafka, and the groups for other clients
// (consumer, admin, streams, listener, jaas, template, retry), make no
// entry, except spring.kafka.jaas.options.<name>, the options of the JAAS
// login module Spring installs, whose entries keep that Key (a password
// there is still a secret written in the file). A spring.kafka.producer.* key (or spring.kafka.* key) that is none
// of the above makes an entry whose Key is its RawKey, so that the linter
// can report it as unknown.
func ParseSpringProperties(name string, r io.Reader) (*File, error) {
	pf, err := ParseProperties(name, r)
	if err != nil {
		return nil, err
	}
	f := &File{Path: name, Dialect: Spring, Comments: pf.Comments, Problems: pf.Problems}
	// Spring Boot 2.4+ splits a properties file into documents at a
	// comment line that is exactly #--- or !---.
	var seps []Pos
	for _, c := range pf.Comments {
		if c.Text == "---" && c.Pos.Col == 1 {
			seps = append(seps, c.Pos)
		}
	}
	m := &springMapper{f: f}
	for _, e := range pf.Entries {
		doc := sort.Search(len(seps), func(i int) bool { return seps[i].Line > e.KeyPos.Line })
		m.add(springItem{elems: splitSpringKey(e.RawKey), raw: e.RawKey, value: e.Value,
			keyPos: e.KeyPos, valuePos: e.ValuePos, doc: doc})
	}
	m.finish()
	return f, nil
}

// ParseSpringYAML reads a Spring Boot application.yml, every document of
// it, and maps its spring.kafka settings onto producer configs as
// ParseSpringProperties does. Nested mappings and dotted keys flatten as
// Spring flattens them (spring: {kafka: {producer: {acks: all}}} and
// spring.kafka.producer.acks: all are the same); "[a.b]" keys are one
// element; a sequence of scalars is joined with commas and positioned at
// its first item. Plain scalars are read as Spring's SnakeYAML reads them
// (YAML 1.1): yes/no/on/off are booleans, 0x1F and 010 integers, ~ and an
// empty value the empty string; RawValue keeps the written form.
//
// A key repeated within one mapping is a Problem: Spring's
// OriginTrackedYamlLoader sets allowDuplicateKeys(false), so the
// application would not start. Alias expansion stops, with a Problem,
// after 65536 nodes.
//
// Entries keep their document index in Doc; later documents win. The
// profile conditions of documents (spring.config.activate.on-profile) are
// kept in DocProfiles: File.ForProfiles evaluates them.
//
// A syntax error in the first document is returned as an error, with its
// line:col (yaml.v3 reports only the line; the column is that of the first
// tab in the line's indentation, else of its first non-blank character). A
// syntax error in a later document ends the reading there and is recorded
// as a Problem; the documents before it are kept.
func ParseSpringYAML(name string, data []byte) (*File, error) {
	f := &File{Path: name, Dialect: Spring, Comments: yamlComments(data)}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	m := &springMapper{f: f}
	for doc := 0; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p, msg := yamlErrorPos(err, data)
			if doc == 0 {
				return nil, fmt.Errorf("%s:%s: %s", name, p, msg)
			}
			f.Problems = append(f.Problems, Problem{Pos: p, Msg: "YAML syntax error, the rest of the file is not read: " + msg})
			break
		}
		w := &yamlWalker{m: m, doc: doc, budget: yamlNodeBudget}
		w.walk(&n, nil, "", Pos{}, nil, 0)
	}
	m.finish()
	return f, nil
}

// invalidUTF8At returns the offset of the first byte of data that is not
// part of valid UTF-8, or -1. A UTF-16 input (with its byte order mark) is
// left to the YAML reader, which decodes it.
func invalidUTF8At(data []byte) int {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return -1
	}
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// bytePos is the line and column (in runes, an invalid byte one) of the
// byte at offset i.
func bytePos(data []byte, i int) Pos {
	before := data[:i]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return posAt(line, col)
}

var (
	yamlLineRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })
	unknownAnchorRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^unknown anchor '(.*)' referenced$`) })
)

// yamlErrorPos finds where a yaml.v3 error is: its message says "yaml:
// line N: what"; the column comes from the text of that line.
func yamlErrorPos(err error, data []byte) (Pos, string) {
	msg := err.Error()
	m := yamlLineRE().FindStringSubmatch(msg)
	if m == nil {
		msg = strings.TrimPrefix(msg, "yaml: ")
		if strings.Contains(msg, "UTF-8") {
			// yaml.v3 checks the encoding of the whole input first
			// and says only "invalid leading UTF-8 octet", with no
			// line: say where the byte is. SnakeYAML's UnicodeReader
			// refuses it too (MalformedInputException): Spring Boot
			// does not start.
			if i := invalidUTF8At(data); i >= 0 {
				return bytePos(data, i), fmt.Sprintf("invalid UTF-8 (byte 0x%02x): a YAML file must be UTF-8, and YAML readers (Spring Boot's SnakeYAML too) refuse it", data[i])
			}
		}
		// "unknown anchor 'a' referenced" has no line: find the *a.
		if a := unknownAnchorRE().FindStringSubmatch(msg); a != nil {
			if i := bytes.Index(data, []byte("*"+a[1])); i >= 0 {
				before := data[:i]
				line := bytes.Count(before, []byte("\n")) + 1
				col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
				return posAt(line, col), msg
			}
		}
		return posAt(1, 1), msg
	}
	line, _ := strconv.Atoi(m[1])
	if yamlParserProblem(m[2]) {
		// yaml.v3's fail() adds one to the 0-based line of scanner errors
		// only; a parser error (parserc.go yaml_parser_set_parser_error*)
		// carries the 0-based line of its context mark.
		line++
	}
	lines := strings.Split(string(data), "\n")
	col := 1
	if line >= 1 && line <= len(lines) {
		text := []rune(strings.TrimRight(lines[line-1], "\r"))
		col = 0
		for i, c := range text {
			if c == '\t' {
				col = i + 1
				break
			}
			if c != ' ' {
				break
			}
		}
		if col == 0 {
			col = 1
			for i, c := range text {
				if c != ' ' {
					col = i + 1
					break
				}
			}
		}
	}
	return posAt(line, col), m[2]
}

// yamlParserProblem tells the parser's problems (parserc.go) from the
// scanner's by their text.
func yamlParserProblem(msg string) bool {
	for _, p := range []string{"did not find expected", "found undefined tag handle", "found duplicate %", "found incompatible YAML document"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// yamlWalker flattens one YAML document into springItems.
type yamlWalker struct {
	m   *springMapper
	doc int
	// budget bounds the nodes visited: aliases of aliases expand
	// exponentially (a "billion laughs" document), and yaml.v3's Node API
	// does not expand them, the walk does.
	budget int
	spent  bool
	// checked holds the mappings checked for duplicate keys.
	checked map[*yaml.Node]bool
}

// yamlNodeBudget is far above any real configuration file. Spring itself
// sets no limit (OriginTrackedYamlLoader: maxAliasesForCollections =
// Integer.MAX_VALUE); this one keeps kdiag from expanding an alias bomb.
const yamlNodeBudget = 1 << 16

// yamlComments finds the comments of a YAML text, for suppressions: a #
// at the start of a line or after a blank, outside quotes, to the end of
// the line. It reads lines, not YAML, so a # inside a block scalar (|)
// that follows a blank counts too; yaml.v3's own comment attachment does
// not keep columns.
func yamlComments(data []byte) []Comment {
	var out []Comment
	for i, line := range strings.Split(string(data), "\n") {
		rs := []rune(strings.TrimRight(line, "\r"))
		var quote rune
		for j, c := range rs {
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				if j == 0 || rs[j-1] == ' ' || rs[j-1] == '\t' || rs[j-1] == ':' || rs[j-1] == '[' || rs[j-1] == '-' || rs[j-1] == ',' {
					quote = c
				}
			case c == '#' && (j == 0 || rs[j-1] == ' ' || rs[j-1] == '\t'):
				out = append(out, Comment{Text: strings.TrimSpace(string(rs[j+1:])), Pos: posAt(i+1, j+1)})
			}
			if c == '#' && quote == 0 && (j == 0 || rs[j-1] == ' ' || rs[j-1] == '\t') {
				break
			}
		}
	}
	return out
}

// stop ends the walk of the document with a Problem at n.
func (w *yamlWalker) stop(n *yaml.Node, msg string) {
	if !w.spent {
		w.spent = true
		w.m.f.Problems = append(w.m.f.Problems, Problem{Pos: posAt(n.Line, n.Column), Msg: msg})
	}
	w.budget = 0
}

// walk flattens node n found at path (written raw, its key at keyPos). A
// non-nil at gives the value position to use instead of n's (for an alias,
// where the *alias is written). depth bounds alias expansion.
func (w *yamlWalker) walk(n *yaml.Node, path []springElem, raw string, keyPos Pos, at *Pos, depth int) {
	if n == nil || depth > 100 || w.spent {
		return
	}
	if w.budget--; w.budget < 0 {
		w.stop(n, fmt.Sprintf("YAML aliases expand to more than %d nodes; the rest of the document is not read", yamlNodeBudget))
		return
	}
	pos := posAt(n.Line, n.Column)
	if at != nil {
		pos = *at
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.walk(c, path, raw, keyPos, nil, depth+1)
		}
	case yaml.AliasNode:
		w.walk(n.Alias, path, raw, keyPos, &pos, depth+1)
	case yaml.MappingNode:
		seen := map[string]bool{}
		check := !w.checked[n]
		if w.checked == nil {
			w.checked = map[*yaml.Node]bool{}
		}
		w.checked[n] = true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if k.Tag != "!!merge" && check {
				// OriginTrackedYamlLoader sets allowDuplicateKeys(false):
				// SnakeYAML throws DuplicateKeyException and the
				// application does not start. (Checked once per mapping,
				// not again where an alias repeats it.)
				if seen[k.Value] {
					w.m.f.Problems = append(w.m.f.Problems, Problem{Pos: posAt(k.Line, k.Column),
						Msg: fmt.Sprintf("duplicate key %q in one YAML mapping: Spring Boot refuses to load the file (SnakeYAML DuplicateKeyException); keep one", k.Value)})
				}
				seen[k.Value] = true
			}
			if k.Tag == "!!merge" {
				// << merges the mapping (or mappings) it names here.
				src := v
				if src.Kind == yaml.AliasNode {
					src = src.Alias
				}
				if src != nil && src.Kind == yaml.SequenceNode {
					for _, s := range src.Content {
						w.walk(s, path, raw, keyPos, nil, depth+1)
					}
				} else {
					w.walk(src, path, raw, keyPos, nil, depth+1)
				}
				continue
			}
			elems := append(append([]springElem(nil), path...), splitSpringKey(k.Value)...)
			childRaw := k.Value
			if raw != "" {
				childRaw = raw + "." + k.Value
				if strings.HasPrefix(k.Value, "[") {
					childRaw = raw + k.Value
				}
			}
			w.walk(v, elems, childRaw, posAt(k.Line, k.Column), nil, depth+1)
		}
	case yaml.SequenceNode:
		scalars := true
		for _, c := range n.Content {
			if c.Kind == yaml.AliasNode && c.Alias != nil {
				c = c.Alias
			}
			if c.Kind != yaml.ScalarNode {
				scalars = false
			}
		}
		if scalars {
			var vals []string
			vpos := pos
			for i, c := range n.Content {
				if i == 0 {
					vpos = posAt(c.Line, c.Column)
				}
				if c.Kind == yaml.AliasNode {
					c = c.Alias
				}
				v, _ := snakeScalar(c)
				vals = append(vals, v)
			}
			w.m.add(springItem{elems: path, raw: raw, value: strings.Join(vals, ","),
				keyPos: keyPos, valuePos: vpos, doc: w.doc})
			return
		}
		for i, c := range n.Content {
			idx := "[" + strconv.Itoa(i) + "]"
			w.walk(c, append(append([]springElem(nil), path...), springElem{name: strconv.Itoa(i), bracket: true}),
				raw+idx, keyPos, nil, depth+1)
		}
	case yaml.ScalarNode:
		if len(path) == 0 {
			return // a document that is only a scalar sets nothing
		}
		v, rawV := snakeScalar(n)
		w.m.add(springItem{elems: path, raw: raw, value: v, rawValue: rawV,
			keyPos: keyPos, valuePos: pos, doc: w.doc})
	}
}

var (
	snakeBool = map[string]string{
		"yes": "true", "Yes": "true", "YES": "true", "true": "true", "True": "true", "TRUE": "true",
		"on": "true", "On": "true", "ON": "true",
		"no": "false", "No": "false", "NO": "false", "false": "false", "False": "false", "FALSE": "false",
		"off": "false", "Off": "false", "OFF": "false",
	}
	snakeNull = map[string]bool{"": true, "~": true, "null": true, "Null": true, "NULL": true}
	snakeInt  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[-+]?(0b[01_]+|0[0-7_]+|0|[1-9][0-9_]*|0x[0-9a-fA-F_]+)$`)
	})
)

// snakeScalar returns the string Spring binds for a scalar: SnakeYAML
// resolves plain scalars by YAML 1.1 and Spring's YamlProcessor turns the
// resulting object back into a string (null becomes ""). The second result
// is the written form when it differs.
func snakeScalar(n *yaml.Node) (string, string) {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 ||
		(n.Tag != "" && n.Tag != "!!null" && n.Tag != "!!bool" && n.Tag != "!!int" && n.Tag != "!!str" && n.Tag != "!!float" && n.Tag != "!!timestamp") {
		return n.Value, ""
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return n.Value, ""
	}
	s := n.Value
	if snakeNull[s] {
		return "", rawIfDiff("", s)
	}
	if b, ok := snakeBool[s]; ok {
		return b, rawIfDiff(b, s)
	}
	if snakeInt().MatchString(s) {
		t := strings.ReplaceAll(s, "_", "")
		sign := ""
		if t[0] == '-' || t[0] == '+' {
			if t[0] == '-' {
				sign = "-"
			}
			t = t[1:]
		}
		base := 10
		switch {
		case strings.HasPrefix(t, "0b"):
			base, t = 2, t[2:]
		case strings.HasPrefix(t, "0x"):
			base, t = 16, t[2:]
		case len(t) > 1 && t[0] == '0':
			base, t = 8, t[1:]
		}
		if v, ok := new(big.Int).SetString(sign+t, base); ok {
			return v.String(), rawIfDiff(v.String(), s)
		}
	}
	return s, ""
}

func rawIfDiff(v, raw string) string {
	if v == raw {
		return ""
	}
	return raw
}

// splitSpringKey splits a Spring property name into its elements: dots
// separate, [..] is one element kept whole.
func splitSpringKey(k string) []springElem {
	var out []springElem
	for i := 0; i < len(k); {
		switch k[i] {
		case '.':
			i++
		case '[':
			j := strings.IndexByte(k[i+1:], ']')
			if j < 0 {
				return append(out, springElem{name: k[i:]})
			}
			out = append(out, springElem{name: k[i+1 : i+1+j], bracket: true})
			i += j + 2
		default:
			j := strings.IndexAny(k[i:], ".[")
			if j < 0 {
				j = len(k) - i
			}
			out = append(out, springElem{name: k[i : i+j]})
			i += j
		}
	}
	return out
}

// uniform is Spring's relaxed form of a name element: lower case, without
// - and _ (batch-size, batchSize and batch_size are one property).
func uniform(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c == '-' || c == '_' {
			continue
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// mapKey builds the map key of spring.kafka[.producer].properties.<rest>.
func mapKey(rest []springElem) string {
	parts := make([]string, 0, len(rest))
	for _, e := range rest {
		if e.bracket {
			parts = append(parts, e.name)
			continue
		}
		parts = append(parts, strings.Map(func(c rune) rune {
			if c == '-' || c == '.' || unicode.IsLetter(c) || unicode.IsDigit(c) {
				return c
			}
			return -1
		}, e.name))
	}
	return strings.Join(parts, ".")
}

// springMapper turns springItems into Entries.
type springMapper struct {
	f *File
	// lists collects indexed items (bootstrap-servers[0]) to join.
	lists map[listKey][]listItem
	order []listKey
}

type listKey struct {
	key  string
	rank int
	doc  int
}

type listItem struct {
	idx int
	e   Entry
}

// add maps one item; it reports nothing for keys that are not the producer's.
func (m *springMapper) add(it springItem) {
	if m.addProfileSetting(it) {
		return
	}
	el := it.elems
	u := func(i int) string {
		if i >= len(el) || el[i].bracket {
			return ""
		}
		return uniform(el[i].name)
	}
	if len(el) < 3 || u(0) != "spring" || u(1) != "kafka" {
		return
	}
	e := Entry{RawKey: it.raw, Value: it.value, RawValue: it.rawValue,
		KeyPos: it.keyPos, ValuePos: it.valuePos, Doc: int32(it.doc)}
	unknown := func(rank int) {
		e.Key, e.Rank = it.raw, int32(rank)
		m.f.Entries = append(m.f.Entries, e)
	}
	// typed maps a typed setting at el[i] (with an optional list index after
	// it for bootstrap-servers) to key.
	typed := func(key string, i, rank int) {
		e.Key, e.Rank = key, int32(rank)
		switch {
		case len(el) == i+1:
		case len(el) == i+2 && key == "bootstrap.servers" && el[i+1].bracket && el[i+1].name == "":
			// OriginTrackedPropertiesLoader expands name[]=a,b,c into
			// name[0], name[1], ...: the same list as name=a,b,c.
		case len(el) == i+2 && key == "bootstrap.servers" && el[i+1].bracket:
			idx, err := strconv.Atoi(el[i+1].name)
			if err != nil {
				unknown(rank)
				return
			}
			m.addListItem(listKey{key, rank, it.doc}, idx, e)
			return
		default:
			unknown(rank)
			return
		}
		if springDataSizeKeys[key] {
			if b, ok := springDataSize(e.Value); ok && b != e.Value {
				e.RawValue, e.Value = e.Value, b
			}
		}
		m.f.Entries = append(m.f.Entries, e)
	}
	var group func(i, rank, propsRank int)
	group = func(i, rank, propsRank int) {
		switch g := u(i); {
		case g == "properties":
			if len(el) == i+1 {
				unknown(propsRank)
				return
			}
			k := mapKey(el[i+1:])
			if k == "" {
				unknown(propsRank)
				return
			}
			e.Key, e.Rank = k, int32(propsRank)
			m.f.Entries = append(m.f.Entries, e)
		case g == "ssl":
			if u(i+1) == "bundle" && len(el) == i+2 {
				return
			}
			if k, ok := springSSLKeys[u(i+1)]; ok {
				typed(k, i+1, rank)
				return
			}
			unknown(rank)
		case g == "security":
			if u(i+1) == "protocol" {
				typed("security.protocol", i+1, rank)
				return
			}
			unknown(rank)
		case rank == RankSpringProducer && springProducerKeys[g] != "":
			typed(springProducerKeys[g], i, rank)
		case rank == RankSpringCommon && g == "bootstrapservers":
			typed("bootstrap.servers", i, rank)
		case rank == RankSpringCommon && g == "clientid":
			typed("client.id", i, rank)
		case rank == RankSpringCommon && g == "producer":
			if len(el) == i+1 {
				return
			}
			group(i+1, RankSpringProducer, RankSpringProducerProperties)
		case rank == RankSpringCommon && g == "jaas" && u(i+1) == "options" && len(el) > i+2:
			// spring.kafka.jaas.options.* are the options of the JAAS
			// login module KafkaJaasLoginModuleInitializer installs for
			// the whole JVM (KafkaProperties.Jaas): no producer key, but
			// a password there is a secret in the file all the same.
			e.Key, e.Rank = "spring.kafka.jaas.options."+mapKey(el[i+2:]), int32(rank)
			m.f.Entries = append(m.f.Entries, e)
		case rank == RankSpringCommon && springOtherGroups[g]:
		default:
			unknown(rank)
		}
	}
	group(2, RankSpringCommon, RankSpringProperties)
}

// addListItem holds an indexed list item until finish joins its list.
func (m *springMapper) addListItem(k listKey, idx int, e Entry) {
	if m.lists == nil {
		m.lists = map[listKey][]listItem{}
	}
	if _, ok := m.lists[k]; !ok {
		m.order = append(m.order, k)
	}
	m.lists[k] = append(m.lists[k], listItem{idx, e})
}

// finish joins indexed lists into one entry each (positioned at the lowest
// index) and puts all entries in file order.
func (m *springMapper) finish() {
	for _, k := range m.order {
		items := m.lists[k]
		sort.SliceStable(items, func(i, j int) bool { return items[i].idx < items[j].idx })
		vals := make([]string, len(items))
		for i, it := range items {
			vals[i] = it.e.Value
		}
		e := items[0].e
		e.Value = strings.Join(vals, ",")
		m.f.Entries = append(m.f.Entries, e)
	}
	sort.SliceStable(m.f.Entries, func(i, j int) bool {
		a, b := m.f.Entries[i], m.f.Entries[j]
		if a.Doc != b.Doc {
			return a.Doc < b.Doc
		}
		if a.KeyPos.Line != b.KeyPos.Line {
			return a.KeyPos.Line < b.KeyPos.Line
		}
		return a.KeyPos.Col < b.KeyPos.Col
	})
}

var dataSizeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([+-]?\d+)([a-zA-Z]{0,2})$`) })

// springDataSize converts a DataSize value as Spring's DataSize.parse does
// (units B, KB, MB, GB, TB, powers of 1024, case-sensitive; no unit is
// bytes). It reports false for what Spring would reject.
func springDataSize(s string) (string, bool) {
	m := dataSizeRE().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", false
	}
	mult := map[string]int64{"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[m[2]]
	if mult == 0 {
		return "", false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return "", false
	}
	v := new(big.Int).Mul(big.NewInt(n), big.NewInt(mult))
	return v.String(), true
}
