package config

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Sources for configurations embedded in Kubernetes manifests.
const (
	// SourceConfigMap is a file under data: of a Kubernetes ConfigMap.
	SourceConfigMap = "configmap"
	// SourceHelm is a configuration block in a Helm chart's values file.
	SourceHelm = "helm"
)

// IsConfigMap reports whether a YAML text holds a Kubernetes ConfigMap (a
// "kind: ConfigMap" line at the top level of one of its documents).
func IsConfigMap(src string) bool {
	for _, line := range strings.Split(src, "\n") {
		if strings.TrimRight(line, " \t\r") == "kind: ConfigMap" {
			return true
		}
	}
	return false
}

// IsHelmValues reports whether a file name is a Helm chart's values file
// (values.yaml, values-prod.yaml, ...).
func IsHelmValues(name string) bool {
	base := strings.ToLower(path.Base(strings.ReplaceAll(name, "\\", "/")))
	ext := path.Ext(base)
	return (ext == ".yaml" || ext == ".yml") && strings.HasPrefix(base, "values")
}

// configFileExts are the names under which a ConfigMap or a values file
// embeds a configuration file.
var configFileExts = []string{".properties", ".conf", ".yml", ".yaml", ".json", ".env"}

// embedsProducerConfig tells a Helm values block that holds a producer
// configuration from other text: by the name of its key, or by keys only
// such a configuration has.
func embedsProducerConfig(key, content string) bool {
	for _, ext := range configFileExts {
		if strings.HasSuffix(strings.ToLower(key), ext) {
			return true
		}
	}
	for _, k := range []string{"bootstrap.servers", "spring.kafka", "metadata.broker.list", "connector.class", "application.id"} {
		if strings.Contains(content, k) {
			return true
		}
	}
	return false
}

// ParseEmbedded reads the configurations a Kubernetes ConfigMap (every
// entry of data: whose name is a configuration file's, *.properties,
// *.yml, ...) or a Helm values file (any block whose key is such a name or
// whose text has bootstrap.servers, spring.kafka, ...) embeds, every
// document of the YAML. Each is parsed as ParseAll parses a file of that
// name (producer.properties as Java properties, application.yml as Spring
// YAML, a log, ...), and its positions are those in the YAML file: a
// literal block (|) keeps its lines, each shifted by the block's
// indentation, exactly. A value in another style (quoted, folded) has
// positions only at the value's start, which a Problem says. Findings about
// an embedded configuration as a whole go to its key.
func ParseEmbedded(name, src, source string) ([]*File, error) {
	dec := yaml.NewDecoder(strings.NewReader(src))
	lines := strings.Split(src, "\n")
	var files []*File
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p, msg := yamlErrorPos(err, []byte(src))
			return files, fmt.Errorf("%s:%s: %s", name, p, msg)
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		visit := func(k, v *yaml.Node) error {
			fs, err := embedded(name, source, k, v, lines)
			files = append(files, fs...)
			return err
		}
		switch source {
		case SourceConfigMap:
			if mv := mapValue(root, "kind"); mv == nil || mv.Value != "ConfigMap" {
				continue
			}
			data := mapValue(root, "data")
			if data == nil || data.Kind != yaml.MappingNode {
				continue
			}
			for i := 0; i+1 < len(data.Content); i += 2 {
				k, v := data.Content[i], data.Content[i+1]
				if v.Kind != yaml.ScalarNode || !hasConfigExt(k.Value) {
					continue
				}
				if err := visit(k, v); err != nil {
					return files, err
				}
			}
		case SourceHelm:
			var walk func(n *yaml.Node, depth int) error
			walk = func(n *yaml.Node, depth int) error {
				if depth > 50 || n.Kind != yaml.MappingNode {
					return nil
				}
				for i := 0; i+1 < len(n.Content); i += 2 {
					k, v := n.Content[i], n.Content[i+1]
					switch {
					case v.Kind == yaml.ScalarNode && strings.Contains(v.Value, "\n") && embedsProducerConfig(k.Value, v.Value):
						if err := visit(k, v); err != nil {
							return err
						}
					case v.Kind == yaml.MappingNode:
						if err := walk(v, depth+1); err != nil {
							return err
						}
					}
				}
				return nil
			}
			if err := walk(root, 0); err != nil {
				return files, err
			}
		}
	}
	return files, nil
}

func hasConfigExt(key string) bool {
	for _, ext := range configFileExts {
		if strings.HasSuffix(strings.ToLower(key), ext) {
			return true
		}
	}
	return false
}

// embedded parses one embedded configuration, named by its key, and moves
// its positions into the YAML file.
func embedded(name, source string, k, v *yaml.Node, lines []string) ([]*File, error) {
	fs, err := ParseAll(k.Value, v.Value, Unknown)
	if err != nil {
		// The embedded file's own error, at its place in the YAML.
		return nil, fmt.Errorf("%s:%d: %s (in %s): %v", name, k.Line, k.Value, name, err)
	}
	shift := func(Pos) Pos { return posAt(v.Line, v.Column) }
	var note *Problem
	if v.Style&yaml.LiteralStyle != 0 {
		// The content starts on the line after the | indicator; each of
		// its lines lost the block's indentation, that of its first
		// line that is not blank.
		indent := 0
		for l := v.Line; l < len(lines); l++ { // lines[v.Line] is the line after the indicator
			t := strings.TrimRight(lines[l], "\r")
			if strings.TrimSpace(t) == "" {
				continue
			}
			indent = len(t) - len(strings.TrimLeft(t, " "))
			break
		}
		base := v.Line
		shift = func(p Pos) Pos { return Pos{Line: int32(base) + p.Line, Col: p.Col + int32(indent)} }
	} else {
		note = &Problem{Pos: posAt(v.Line, v.Column), Note: true, Msg: fmt.Sprintf("%s is not a literal block (|): the positions of its findings are where the value starts; write it as a literal block for exact ones", k.Value)}
	}
	for _, f := range fs {
		f.Path = name
		f.Source = source
		for i := range f.Entries {
			f.Entries[i].KeyPos, f.Entries[i].ValuePos = shift(f.Entries[i].KeyPos), shift(f.Entries[i].ValuePos)
		}
		for i := range f.Comments {
			f.Comments[i].Pos = shift(f.Comments[i].Pos)
		}
		for i := range f.Problems {
			f.Problems[i].Pos = shift(f.Problems[i].Pos)
		}
		if note != nil {
			f.Problems = append(f.Problems, *note)
		}
		f.Origin = posAt(k.Line, k.Column)
	}
	return fs, nil
}
