package config

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Parse parses data as dialect d, detecting the dialect first when d is
// Unknown (see Detect). A Spring file is read as YAML when its name ends in
// .yml or .yaml, or, for a name without either extension (standard input),
// when its content looks like YAML; otherwise as application.properties.
func Parse(name string, data []byte, d Dialect) (*File, error) {
	return ParseString(name, string(data), d)
}

// ParseAll parses one input into the configurations it holds: one File
// for a configuration file (a Streams or Connect one mapped to its
// producer's settings); for an application log (a name ending in .log, or
// content with a "ProducerConfig values:" block) one File per block; for a
// Kubernetes ConfigMap or a Helm values file one per configuration it
// embeds; for a docker-compose file one per Kafka Connect service, for an environment
// file (.env, *.env) the Connect producer it configures; for a connector's
// *.json its overrides. A source that configures no producer gives no File.
// d applies to configuration files only. A binary input (see CheckText)
// is refused with a *BinaryError.
func ParseAll(name, src string, d Dialect) ([]*File, error) {
	if err := CheckText(src); err != nil {
		return nil, err
	}
	if strings.HasSuffix(strings.ToLower(name), ".log") || IsProducerLog(src) {
		return ParseProducerLog(name, src), nil
	}
	lower := strings.ToLower(filepath.Base(name))
	if lower == ".env" || strings.HasSuffix(lower, ".env") {
		return ParseEnvSource(name, src), nil
	}
	if ext := filepath.Ext(lower); ext == ".yml" || ext == ".yaml" {
		switch {
		case IsConfigMap(src):
			return ParseEmbedded(name, src, SourceConfigMap)
		case IsHelmValues(name) && !looksLikeSpringYAML(src):
			return ParseEmbedded(name, src, SourceHelm)
		case IsCompose(src) && !looksLikeSpringYAML(src):
			return ParseCompose(name, src)
		}
	}
	if strings.HasSuffix(lower, ".json") {
		f, err := ParseConnectorJSON(name, src)
		if err != nil {
			return nil, err
		}
		return []*File{f}, nil
	}
	f, err := ParseString(name, src, d)
	if err != nil {
		return nil, err
	}
	if f.Dialect == Java && f.Source == "" {
		if s := kafkaAppSource(f.Entries); s != "" {
			mapKafkaApp(f, s)
		}
	}
	return []*File{f}, nil
}

// ParseString is Parse of a string. Keys and values written without
// escapes are substrings of src, so that a large file is held once: read it
// into a strings.Builder (whose String does not copy) to parse it this way.
func ParseString(name, src string, d Dialect) (*File, error) {
	if d == Unknown {
		var ok bool
		if d, ok = detectByName(name, src); !ok {
			// Detect by the keys, from the one parse the file needs
			// anyway.
			f := &File{Path: name}
			parsePropertiesInto(f, src)
			if d = detectByKeys(f.Entries); d != Spring {
				f.Dialect = d
				return f, nil
			}
		}
	}
	switch d {
	case Java, Librdkafka:
		f := &File{Path: name, Dialect: d}
		parsePropertiesInto(f, src)
		return f, nil
	case Spring:
		if isYAML(name, src) {
			return ParseSpringYAML(name, []byte(src))
		}
		return ParseSpringProperties(name, strings.NewReader(src))
	}
	return nil, fmt.Errorf("%s: unknown dialect %d", name, d)
}

// Effective returns the entry that wins for each producer key: the highest
// Rank, and among equal ranks the last one written (Properties.load keeps
// the last put; Spring binds the last document last).
func (f *File) Effective() map[string]Entry {
	m := make(map[string]Entry, len(f.Entries))
	for _, e := range f.Entries {
		if old, ok := m[e.Key]; ok && old.Rank > e.Rank {
			continue
		}
		m[e.Key] = e
	}
	return m
}

// Duplicates returns each producer key set more than once at the same
// Rank in the same document, with all those entries in file order (the
// last one wins). Entries of different ranks for one key are not
// duplicates: in Spring that is the documented way to override a typed
// setting; nor are entries in different YAML (or #---) documents, where a
// later, profile-specific document overriding an earlier one is the point.
// A key repeated at two ranks lists the lower rank's entries first.
func (f *File) Duplicates() map[string][]Entry {
	type kr struct {
		key       string
		rank, doc int32
	}
	count := map[kr]int{}
	for _, e := range f.Entries {
		count[kr{e.Key, e.Rank, e.Doc}]++
	}
	d := map[string][]Entry{}
	for _, e := range f.Entries {
		if count[kr{e.Key, e.Rank, e.Doc}] > 1 {
			d[e.Key] = append(d[e.Key], e)
		}
	}
	for _, es := range d {
		sort.SliceStable(es, func(i, j int) bool { return es[i].Rank < es[j].Rank })
	}
	return d
}

// Map returns the effective value of each producer key.
func (f *File) Map() map[string]string {
	eff := f.Effective()
	m := make(map[string]string, len(eff))
	for k, e := range eff {
		m[k] = e.Value
	}
	return m
}
