package rules

import (
	"fmt"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// KD41x: placeholders (see placeholders.go).

var kd410 = &Rule{
	ID:       "KD410",
	Title:    "placeholder that nothing resolves: the client reads the text as written",
	Severity: Error,
	Category: "placeholder",
	PerEntry: true,
	Rationale: "The Java client resolves ${provider:[path:]key} variables in its AbstractConfig constructor, before it " +
		"parses any value, but only for the providers config.providers names, each with a " +
		"config.providers.<name>.class: a variable of any other provider is left as written, and the client then " +
		"parses that text (linger.ms=${env:LINGER_MS} without config.providers=env fails as \"not a number\", a " +
		"bootstrap.servers variable as an invalid url). That is an error. Kafka clients do not resolve ${NAME} " +
		"without a provider (that is Spring's syntax, or a template tool's), and nothing resolves template text such " +
		"as <CLUSTER API SECRET>, whole or as an option of sasl.jaas.config (password=\"<PASSWORD>\", which is no " +
		"secret in clear): both are warnings, since a tool may fill them in before the file is used. Such a " +
		"value is not checked otherwise.",
	Remediation: "Declare the provider (config.providers=env with " +
		"config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider; file with " +
		"FileConfigProvider), note that config.providers is split on commas without trimming (\"file, env\" names " +
		"\" env\"), or fill in the value; to check a templated file, lint it filled in, or give --env FILE.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/config/AbstractConfig.java " +
		"(resolveConfigVariables, instantiateConfigProviders: configProviders.split(\",\")) and " +
		"ConfigTransformer.java (DEFAULT_PATTERN, replace keeps an unresolved variable)",
	Check: func(p *Pass) {
		for _, e := range p.Entries {
			ph := p.view.placeholderOf(e)
			if p.view.shadowed(e) {
				continue // the client never reads it (KD409)
			}
			if ph != nil && ph.kind == phLiteral {
				p.reportValue(e, ph.severity, fmt.Sprintf("%s: %s %s", name(e), writtenShown(e, ph), ph.literal), "")
			}
			if ph == nil && isJAASKey(e.Key) {
				reportJAASTemplates(p, e)
			}
		}
	},
}

var kd411 = &Rule{
	ID:       "KD411",
	Title:    "value known only at run time: not checked",
	Severity: Info,
	Category: "placeholder",
	PerEntry: true,
	Rationale: "A value taken from a declared config provider (${env:NAME}, ${file:path:key}) or a Spring " +
		"placeholder without a default (${KAFKA_LINGER}) is known only when the client starts. kdiag cannot check " +
		"its type or range, or the settings that depend on it, and says so for the keys it would have checked. A " +
		"Spring placeholder with a default (${KAFKA_LINGER:5}) is checked with its default, and the finding says so.",
	Remediation: "Nothing to fix. To check the values, give kdiag lint --env FILE with the variables " +
		"(NAME=value lines), or add a default to the Spring placeholder.",
	Source: "apache/kafka AbstractConfig.resolveConfigVariables (config providers, resolved when the client is " +
		"created); Spring Framework PropertyPlaceholderHelper (${name:default})",
	Check: func(p *Pass) {
		for _, e := range p.Entries {
			ph := p.view.placeholderOf(e)
			if ph == nil || ph.kind != phRuntime || !checkable(p.view, e.Key) || p.view.shadowed(e) {
				continue
			}
			p.reportValue(e, 0, fmt.Sprintf("%s: %s %s: kdiag does not check it", name(e), writtenShown(e, ph), ph.runtime), "")
		}
	},
}

// writtenShown is the value as written, as a message may print it: a
// secret's is hidden (a JAAS value keeps its option names).
func writtenShown(e config.Entry, ph *placeholder) string {
	w := e
	w.Value = ph.written
	if v := shown(w); v != ph.written {
		return "the value (" + v + ")"
	}
	return strings.TrimSpace(ph.written)
}

// checkable reports whether kdiag would check key's value: a number, a
// boolean, an enumeration or a validated string, or the broker list.
func checkable(v *fileView, key string) bool {
	if key == "bootstrap.servers" || key == "metadata.broker.list" || key == "acks" {
		return true
	}
	if v.dialect == config.Librdkafka {
		s, ok := LibrdkafkaSetting(key)
		return ok && s.Type != "string"
	}
	s, ok := JavaSetting(key)
	if !ok {
		return false
	}
	switch s.Type {
	case "INT", "LONG", "SHORT", "DOUBLE", "BOOLEAN":
		return true
	}
	return len(s.Enum) > 0 || s.NonEmpty || s.HasMin || s.HasMax
}

// reportJAASTemplates reports the options of a JAAS configuration whose value
// is template text (password="<PASSWORD>"): the login module gets the text
// as the password. The value is not printed: it stands where a secret goes.
func reportJAASTemplates(p *Pass, e config.Entry) {
	_, opts, _ := parseJAAS(e.Value)
	for _, o := range opts {
		if templateRE().MatchString(strings.TrimSpace(o.value)) {
			p.reportValue(e, Warning, fmt.Sprintf("%s: the %s option holds template text (<...>) that was never filled in: "+
				"the login module uses the text as written", name(e), o.name), "")
		}
	}
}
