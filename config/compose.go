package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// SourceCompose is a container's environment in a docker-compose file.
const SourceCompose = "compose"

// envToProp turns an environment variable of a Confluent image into the
// property it sets, as the images' configure scripts do (dub.py
// env_to_props, confluentinc/confluent-docker-utils): the prefix dropped,
// lower case, "___" a dash, "__" an underscore, "_" a dot.
// CONNECT_PRODUCER_LINGER_MS is producer.linger.ms.
func envToProp(name, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return "", false
	}
	p := strings.ToLower(rest)
	p = strings.ReplaceAll(p, "_", ".")
	p = strings.ReplaceAll(p, "...", "-")
	p = strings.ReplaceAll(p, "..", "_")
	return p, true
}

// brokerIdleVars are the variables that set a broker container's
// connections.max.idle.ms: Confluent's cp-kafka and cp-server and Apache's
// apache/kafka image (KAFKA_ prefix, the same convention), Bitnami's
// (KAFKA_CFG_).
var brokerIdleVars = []string{"KAFKA_CONNECTIONS_MAX_IDLE_MS", "KAFKA_CFG_CONNECTIONS_MAX_IDLE_MS"}

// fromContainerEnv makes the producer configuration of a Kafka Connect
// container (Confluent's cp-kafka-connect, CONNECT_ variables) from its
// environment: the variables become worker properties and those give the
// producer settings (mapKafkaApp), each entry keeping the variable as its
// RawKey and the variable's positions. It returns nil for a container
// without CONNECT_ variables.
func fromContainerEnv(name, source string, vars []Entry) *File {
	f := &File{Path: name, Dialect: Java, Source: source}
	for _, v := range vars {
		if p, ok := envToProp(v.Key, "CONNECT_"); ok {
			e := v
			e.Key = p
			f.Entries = append(f.Entries, e)
		}
	}
	if len(f.Entries) == 0 {
		return nil
	}
	mapKafkaApp(f, SourceConnectWorker)
	f.Source = source
	return f
}

// brokerIdleOf returns the connections.max.idle.ms a broker container's
// variables set, 0 when they set none.
func brokerIdleOf(vars []Entry) int64 {
	for _, v := range vars {
		for _, name := range brokerIdleVars {
			if v.Key == name {
				if n, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64); err == nil && n != 0 {
					return n
				}
			}
		}
	}
	return 0
}

// ParseEnvSource reads an environment file (.env, an env_file of compose,
// docker run --env-file) for the producer configuration of the Kafka
// Connect container it is for: CONNECT_PRODUCER_* and CONNECT_BOOTSTRAP_SERVERS
// (see fromContainerEnv). A broker's KAFKA_CONNECTIONS_MAX_IDLE_MS in it
// sets the broker idle the connect settings are checked against. It
// returns no File when the file configures no Connect producer.
func ParseEnvSource(name, src string) []*File {
	ef := ParseEnvFile(name, src)
	f := fromContainerEnv(name, SourceEnv, ef.Entries)
	if f == nil {
		return nil
	}
	f.Comments, f.Problems = ef.Comments, ef.Problems
	f.BrokerIdleMS = brokerIdleOf(ef.Entries)
	return []*File{f}
}

var composeVarRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
})

// IsCompose reports whether src is a docker-compose file: a YAML mapping
// with a top-level "services" mapping.
func IsCompose(src string) bool {
	for _, line := range strings.Split(src, "\n") {
		if strings.TrimRight(line, " \t\r") == "services:" {
			return true
		}
	}
	return false
}

// ParseCompose reads a docker-compose file: one File for each service
// whose environment (a mapping or a list of NAME=value) configures a Kafka
// Connect producer (CONNECT_ variables, see fromContainerEnv), positioned
// at the variables in the file. A broker service's
// KAFKA_CONNECTIONS_MAX_IDLE_MS (the smallest, if several) is the broker
// idle those are checked against. Compose's interpolation (${NAME},
// ${NAME:-default}) is left to the rules, which see it as a placeholder:
// compose fills it in from its environment.
func ParseCompose(name, src string) ([]*File, error) {
	dec := yaml.NewDecoder(strings.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		p, msg := yamlErrorPos(err, []byte(src))
		return nil, fmt.Errorf("%s:%s: %s", name, p, msg)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	services := mapValue(doc.Content[0], "services")
	if services == nil || services.Kind != yaml.MappingNode {
		return nil, nil
	}
	var files []*File
	brokerIdle := int64(math.MaxInt64)
	for i := 0; i+1 < len(services.Content); i += 2 {
		svc := services.Content[i+1]
		vars := composeEnv(mapValue(svc, "environment"))
		if f := fromContainerEnv(name, SourceCompose, vars); f != nil {
			// Findings about the service's configuration as a whole go
			// to its name.
			f.Origin = posAt(services.Content[i].Line, services.Content[i].Column)
			files = append(files, f)
		}
		if n := brokerIdleOf(vars); n != 0 && n < brokerIdle {
			brokerIdle = n
		}
	}
	for _, f := range files {
		f.Comments = yamlComments([]byte(src))
		if brokerIdle != math.MaxInt64 {
			f.BrokerIdleMS = brokerIdle
		}
	}
	return files, nil
}

// mapValue returns the value node of key in a mapping node.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// composeEnv reads a service's environment: a mapping (NAME: value) or a
// list of "NAME=value" (a list item without "=" takes its value from
// compose's own environment, which kdiag does not have, and is left out).
// Positions are exact: in the list form the name is where the item's text
// starts (after its quote, if quoted) and the value right after the "=".
func composeEnv(env *yaml.Node) []Entry {
	if env == nil {
		return nil
	}
	var out []Entry
	switch env.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(env.Content); i += 2 {
			k, v := env.Content[i], env.Content[i+1]
			val, _ := snakeScalar(v)
			if v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || v.Tag == "!!str" {
				val = v.Value
			}
			out = append(out, Entry{Key: k.Value, RawKey: k.Value, Value: val,
				KeyPos: posAt(k.Line, k.Column), ValuePos: posAt(v.Line, v.Column)})
		}
	case yaml.SequenceNode:
		for _, it := range env.Content {
			if it.Kind != yaml.ScalarNode {
				continue
			}
			k, v, ok := strings.Cut(it.Value, "=")
			if !ok || k == "" {
				continue
			}
			col := it.Column
			if it.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				col++
			}
			// The value starts after "NAME=" on the item's line (names
			// are [A-Za-z0-9_], one column a character).
			out = append(out, Entry{Key: k, RawKey: k, Value: v,
				KeyPos: posAt(it.Line, col), ValuePos: posAt(it.Line, col+len(k)+1)})
		}
	}
	return out
}

// composeExpand is compose's interpolation of ${NAME}, ${NAME:-default},
// ${NAME-default} and $NAME from env: it returns the text, the names whose
// default was used, and the names with neither a value nor a default.
func composeExpand(s string, env map[string]string) (string, []string, []string) {
	var defaults, unresolved []string
	out := composeVarRE().ReplaceAllStringFunc(strings.ReplaceAll(s, "$$", "\x00"), func(m string) string {
		sub := composeVarRE().FindStringSubmatch(m)
		name, op, def := sub[1], sub[2], sub[3]
		if name == "" {
			name = sub[4]
		}
		v, ok := env[name]
		switch {
		case ok && !(op == ":-" && v == ""):
			return v
		case op == ":-" || op == "-":
			defaults = append(defaults, name)
			return def
		}
		unresolved = append(unresolved, name)
		return m
	})
	return strings.ReplaceAll(out, "\x00", "$"), defaults, unresolved
}

// ComposeExpand is composeExpand for the rules: see there.
func ComposeExpand(s string, env map[string]string) (string, []string, []string) {
	return composeExpand(s, env)
}
