package rules

import (
	"fmt"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// KD5xx: secrets written in clear. Findings name the key and never carry the
// value: Evidence goes through Redact, and LintFile scrubs every secret of
// the file from every finding as a second line of defence.

// clearSecretKeys are the keys whose value is itself a credential (the
// Java client's PASSWORD-type configs that hold one, and librdkafka's
// sensitive properties that do). PEM certificates are PASSWORD-typed in Java
// but public, so they are redacted and not reported.
var clearSecretKeys = map[string]bool{
	"ssl.key.password": true, "ssl.keystore.password": true, "ssl.truststore.password": true,
	"ssl.keystore.key": true, "ssl.key.pem": true, "sasl.password": true,
	"sasl.oauthbearer.client.credentials.client.secret": true, "sasl.oauthbearer.client.secret": true,
	"sasl.oauthbearer.assertion.private.key.passphrase": true, "sasl.oauthbearer.assertion.private.key.pem": true,
}

// isReference reports whether a value points at a secret rather than holding
// it: Kafka config providers (${file:/etc/kafka/secrets.properties:pw},
// ${env:PW}, ${vault:...}) and Spring placeholders (${KAFKA_PASSWORD}).
func isReference(val string) bool {
	v := strings.TrimSpace(val)
	return strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}")
}

var kd501 = &Rule{
	PerEntry: true,
	ID:       "KD501",
	Title:    "password or private key written in clear",
	Severity: Error,
	Category: "secrets",
	Rationale: "ssl.key.password, ssl.keystore.password, ssl.truststore.password, ssl.keystore.key, OAuth " +
		"client secrets and, for librdkafka, sasl.password and ssl.key.pem hold credentials. Written in a " +
		"configuration file they end up in version control, container images and support bundles. Kafka " +
		"clients can read them from elsewhere: config providers (config.providers=file,env with " +
		"${file:/path:key} or ${env:NAME}), Spring placeholders (${KAFKA_PASSWORD}), or the application " +
		"setting them at runtime. kdiag reports the key and never prints the value.",
	Remediation: "Move the secret out of the file: e.g. config.providers=env with " +
		"config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider and " +
		"ssl.key.password=${env:SSL_KEY_PASSWORD}, or a Spring placeholder; then rotate the exposed secret.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/config/SslConfigs.java and SaslConfigs.java (Type.PASSWORD keys), apache/kafka clients/src/main/java/org/apache/kafka/common/config/types/Password.java (shown as [hidden]); confluentinc/librdkafka CONFIGURATION.md (properties marked sensitive)",
	Check: func(p *Pass) {
		if p.File.Source == config.SourceLog {
			return // the log shows a password as [hidden]
		}
		for _, e := range p.Entries {
			if !clearSecretKeys[e.Key] || strings.TrimSpace(e.Value) == "" || isReference(e.Value) || p.view.placeholderOf(e) != nil {
				continue
			}
			p.reportValue(e, 0, fmt.Sprintf("%s holds a secret in clear (value hidden)", name(e)), "")
		}
	},
}

// jaasCredentialOptions are the JAAS options that carry credentials.
var jaasCredentialOptions = []string{"password", "clientSecret", "keyPassword", "storePass", "keyPass"}

var kd502 = &Rule{
	PerEntry: true,
	ID:       "KD502",
	Title:    "password inside sasl.jaas.config written in clear",
	Severity: Error,
	Category: "secrets",
	Rationale: "sasl.jaas.config for PLAIN and SCRAM carries the password (password=\"...\") and for OAUTHBEARER " +
		"client credentials often the client secret (clientSecret=\"...\") inline. The whole value is a " +
		"PASSWORD-type config, hidden in the client's logs, but in a file it is in clear. kdiag reports the " +
		"option and never prints its value.",
	Remediation: "Take the password from a config provider (password=\"${env:KAFKA_PASSWORD}\" with " +
		"config.providers=env, or ${file:...}), or a Spring placeholder; then rotate the exposed password.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/config/SaslConfigs.java (SASL_JAAS_CONFIG, " +
		"Type.PASSWORD) and common/security/JaasConfig.java (a StreamTokenizer: single and double quotes alike); Spring " +
		"Boot KafkaProperties.Jaas (spring.kafka.jaas.options)",
	Dialects: []config.Dialect{config.Java, config.Spring},
	Check: func(p *Pass) {
		if p.File.Source == config.SourceLog {
			return // the log shows sasl.jaas.config as [hidden]
		}
		for _, e := range p.Entries {
			if opt, ok := strings.CutPrefix(e.Key, "spring.kafka.jaas.options."); ok {
				if p.view.placeholderOf(e) != nil {
					continue // template text, a placeholder: KD410, KD411
				}
				val := strings.TrimSpace(e.Value)
				if containsFold(jaasCredentialOptions, opt) && val != "" && !isReference(val) {
					p.reportValue(e, 0, fmt.Sprintf("%s: the %s option of the JAAS login module Spring installs holds a secret in clear (value hidden)", e.RawKey, opt), "")
				}
				continue
			}
			if e.Key != "sasl.jaas.config" {
				continue
			}
			_, opts, _ := parseJAAS(e.Value)
			for _, o := range opts {
				opt := o.name
				if !containsFold(jaasCredentialOptions, opt) {
					continue
				}
				// Quoted or not, single or double quotes (JaasConfig's
				// StreamTokenizer treats both alike), a reference is not
				// a secret in clear.
				val := strings.TrimSpace(o.value)
				if val == "" || isReference(val) || templateRE().MatchString(val) {
					continue // template text (<PASSWORD>) is KD410's
				}
				p.reportValue(e, 0, fmt.Sprintf("%s: the %s option holds a secret in clear (value hidden)", name(e), opt), "")
			}
		}
	},
}
