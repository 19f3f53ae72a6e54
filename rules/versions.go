package rules

import (
	"embed"
	"fmt"
	"path"
	"strings"
	"sync"
)

// The Java producer's configs of the 2.x releases, one table per minor
// release (its last patch release), read from apache/kafka's source at the
// tag by upstream/java-configs.sh (ProducerConfig's ConfigDef, printed by
// upstream/ConfigDump.java): which keys exist, their types, defaults and
// validators. 2.1's is the same as the kafka-clients-2.1.1 jar's. The 3.9
// and 4.x facts are data/java-producer-configs.tsv's.
//
//go:embed upstream/java-producer-2.*.tsv
var java2FS embed.FS

// java2Versions are the 2.x releases of the tables, in order.
var java2Versions = []string{"2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8"}

var java2Catalogs = sync.OnceValue(func() map[Version]map[string]Setting {
	out := map[Version]map[string]Setting{}
	for _, vs := range java2Versions {
		v, err := parseMajorMinor(vs)
		if err != nil {
			panic(err)
		}
		name := path.Join("upstream", "java-producer-"+vs+".tsv")
		b, err := java2FS.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("catalog: %v", err)) // embedded: a build defect
		}
		m := map[string]Setting{}
		for i, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, "\t")
			if strings.HasPrefix(line, "#") || len(f) != 5 || f[0] == "name" {
				if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") && f[0] != "name" {
					panic(fmt.Sprintf("catalog: %s:%d: %d columns, want 5", name, i+1, len(f)))
				}
				continue
			}
			s := Setting{Name: f[0], Type: f[1], Default39: f[2], Default4x: f[2], Validator: f[3],
				Importance: f[4], Status: "active in " + vs}
			s.Password = s.Type == "PASSWORD"
			parseJavaValidator(&s)
			java2Checks(&s, v)
			m[s.Name] = s
		}
		out[v] = m
	}
	return out
})

// java2Checks adds the checks a 2.x producer makes of a value outside its
// ConfigDef, when KafkaProducer is created: compression.type by
// CompressionType.forName (exact names; zstd from 2.1), security.protocol by
// SecurityProtocol.forName (valueOf of the upper-cased name). Both throw
// IllegalArgumentException, so the producer does not start, as with a
// validator (which 3.x added).
func java2Checks(s *Setting, v Version) {
	if s.Validator != "-" && s.Validator != "" {
		return
	}
	switch s.Name {
	case "compression.type":
		s.Enum = []string{"none", "gzip", "snappy", "lz4"}
		if v.AtLeast(2, 1) {
			s.Enum = append(s.Enum, "zstd")
		}
	case "security.protocol":
		s.Enum, s.EnumFold = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, true
	}
}

// javaSettingAt returns key's config as the Java producer of version v
// defines it: for 2.x from that release's table, otherwise the catalog's
// row. ok is false when that producer has no such key.
func javaSettingAt(key string, v Version) (Setting, bool) {
	if v.Major == 2 {
		s, ok := java2Catalogs()[v][key]
		return s, ok
	}
	s, ok := JavaSetting(key)
	if !ok || !s.AvailableIn(v) {
		return s, false
	}
	return s, true
}

// knownJavaKey reports whether any Java producer kdiag knows (2.0 to 4.x)
// has key.
func knownJavaKey(key string) bool {
	if _, ok := JavaSetting(key); ok {
		return true
	}
	for _, m := range java2Catalogs() {
		if _, ok := m[key]; ok {
			return true
		}
	}
	return false
}

// javaKeyHistory returns the first release kdiag knows to have key: a 2.x
// release, the catalog's AddedIn (4.0, 4.1), "3.x (after 2.8)" for a key
// 3.9 has and 2.8 has not, "" for a key no release has.
func javaKeyHistory(key string) (first string) {
	for _, vs := range java2Versions {
		v, _ := parseMajorMinor(vs)
		if _, ok := java2Catalogs()[v][key]; ok {
			return vs
		}
	}
	s, ok := JavaSetting(key)
	if !ok {
		return ""
	}
	if s.AddedIn != "" {
		return s.AddedIn
	}
	return java3x
}

// java3x is javaKeyHistory's answer for a key 3.9 has and 2.8 has not.
const java3x = "3.x (after 2.8)"
