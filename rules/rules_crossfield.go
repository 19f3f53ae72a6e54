package rules

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/kdiag/kdiag/config"
)

// KD3xx: what the producer rejects or silently overrides when it looks at
// several keys together (ProducerConfig.postProcessAndValidateIdempotenceConfigs,
// KafkaProducer.configureDeliveryTimeout, CommonClientConfigs).

var kd301 = &Rule{
	ID:       "KD301",
	Title:    "delivery.timeout.ms is below linger.ms + request.timeout.ms",
	Severity: Error,
	Category: "crossfield",
	Rationale: "KafkaProducer.configureDeliveryTimeout requires delivery.timeout.ms >= linger.ms + " +
		"request.timeout.ms (linger and the sum capped at Integer.MAX_VALUE). If delivery.timeout.ms is set " +
		"explicitly, the producer throws ConfigException \"delivery.timeout.ms should be equal to or larger " +
		"than linger.ms + request.timeout.ms\" and does not start. If it is left at its default (120000), the " +
		"producer logs a WARN and silently raises it to linger.ms + request.timeout.ms. The linger.ms default " +
		"is 0 in 3.9 and 5 in 4.0 and later. librdkafka requires message.timeout.ms (alias " +
		"delivery.timeout.ms; 0 = infinite) to be greater than linger.ms (queue.buffering.max.ms) and fails " +
		"when both are set that way.",
	Remediation: "Raise delivery.timeout.ms to at least linger.ms + request.timeout.ms, or lower linger.ms or " +
		"request.timeout.ms.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/KafkaProducer.java (configureDeliveryTimeout, lingerMs); apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (LINGER_MS_CONFIG default); confluentinc/librdkafka src/rdkafka_conf.c rd_kafka_conf_finalize (message.timeout.ms and linger.ms)",
	Check: func(p *Pass) {
		v := p.view
		if v.dialect == config.Librdkafka {
			checkLibDeliveryTimeout(p)
			return
		}
		dt, dtE, dtSet, ok1 := v.javaInt("delivery.timeout.ms")
		lg, lgE, lgSet, ok2 := v.javaInt("linger.ms")
		rt, rtE, rtSet, ok3 := v.javaInt("request.timeout.ms")
		if !ok1 || !ok2 || !ok3 {
			return
		}
		// KafkaProducer.lingerMs: (int) Math.min(linger.ms,
		// Integer.MAX_VALUE); the sum is capped at Integer.MAX_VALUE too.
		sumText := fmt.Sprintf("%d + %d = %d", lg, rt, lg+rt)
		lgRaw := lg
		lg = min(lg, math.MaxInt32)
		sum := min(lg+rt, math.MaxInt32)
		if lgRaw != lg || sum != lg+rt {
			sumText = fmt.Sprintf("%d + %d, which the producer caps at %d", lgRaw, rt, sum)
		}
		if dt >= sum {
			return
		}
		if dtSet {
			p.reportValue(dtE, Error, fmt.Sprintf("%s: %d is below linger.ms + request.timeout.ms (%s): "+
				"the producer throws ConfigException at startup", name(dtE), dt, sumText),
				fmt.Sprintf("Set delivery.timeout.ms to at least %d, or lower linger.ms/request.timeout.ms.", sum))
			return
		}
		at := rtE
		if !rtSet || (lgSet && lg > rt) {
			at = lgE
		}
		if !rtSet && !lgSet {
			return // all defaults: 120000 >= 5 + 30000
		}
		p.reportValue(at, Warning, fmt.Sprintf("linger.ms + request.timeout.ms (%s) exceeds the default "+
			"delivery.timeout.ms (%d): the producer logs a WARN and silently raises delivery.timeout.ms to %d",
			sumText, dt, sum),
			fmt.Sprintf("Set delivery.timeout.ms explicitly to at least %d, so that the timeout is the one you chose.", sum))
	},
}

func checkLibDeliveryTimeout(p *Pass) {
	v := p.view
	mt, mtE, mtSet, ok1 := v.libValue("message.timeout.ms", "delivery.timeout.ms")
	lg, lgE, lgSet, ok2 := v.libValue("linger.ms", "queue.buffering.max.ms")
	if !ok1 || !ok2 || !lgSet {
		return // librdkafka lowers an unset linger.ms itself
	}
	mtN, err1 := strconv.ParseFloat(mt, 64)
	lgN, err2 := strconv.ParseFloat(lg, 64)
	if err1 != nil || err2 != nil || mtN == 0 || mtN > lgN {
		return
	}
	msg := fmt.Sprintf("%s: %s is not greater than linger.ms (%s): librdkafka refuses the configuration", name(mtE), mt, lg)
	if !mtSet {
		p.reportValue(lgE, Error, fmt.Sprintf("%s: %s is not below message.timeout.ms (default %s): librdkafka refuses the configuration", name(lgE), lg, mt),
			"Lower linger.ms well below message.timeout.ms.")
		return
	}
	p.reportValue(mtE, Error, msg, "Set message.timeout.ms well above linger.ms (the default is 300000).")
}

// javaIdempotence returns whether the Java producer starts with idempotence
// on before its conflict checks, and whether the file sets it.
func (v *fileView) javaIdempotence() (on bool, e config.Entry, set, ok bool) {
	val, e, set, ok := v.javaValue("enable.idempotence")
	if !ok {
		return false, e, set, false
	}
	b, err := parseJavaBool(val)
	if err != nil {
		return false, e, set, false
	}
	if !set && !v.version.AtLeast(3, 0) {
		// Before 3.0 a transactional.id turns idempotence on when
		// enable.idempotence is not written (2.x KafkaProducer
		// .configureTransactionState: userConfiguredTransactions).
		if _, tx := v.get("transactional.id"); tx {
			b = true
		}
	}
	return b, e, set, true
}

// javaAcks returns acks as the producer normalizes it ("all" -> -1).
func (v *fileView) javaAcks() (n int, e config.Entry, set, ok bool) {
	val, e, set, ok := v.javaValue("acks")
	if !ok {
		return 0, e, set, false
	}
	if strings.EqualFold(val, "all") {
		return -1, e, set, true
	}
	if !containsString([]string{"-1", "0", "1"}, val) {
		return 0, e, set, false // KD308
	}
	x, _ := strconv.Atoi(val)
	return x, e, set, true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// idemConflict is one setting that disables (or, with idempotence explicitly
// enabled, rejects) idempotence.
type idemConflict struct {
	rule  string
	e     config.Entry
	fatal bool // ConfigException rather than silent disabling
	msg   string
}

// javaIdempotenceConflicts lists the conflicts in the order
// postProcessAndValidateIdempotenceConfigs checks them; disabled says whether
// the producer ends with idempotence off without throwing.
func (v *fileView) javaIdempotenceConflicts() (disabled bool, cs []idemConflict) {
	on, _, idemSet, ok := v.javaIdempotence()
	if !ok || !on {
		return !on && ok, nil
	}
	// Before 3.0 idempotence was off by default and any conflict with
	// it, once on, was a ConfigException (2.x KafkaProducer.configureAcks,
	// configureRetries, configureInflightRequests).
	strict := idemSet || !v.version.AtLeast(3, 0)
	with := "with enable.idempotence=true"
	if !idemSet && strict {
		with = "with transactional.id set (which turns idempotence on before 3.0)"
	}
	if r, e, set, ok := v.javaInt("retries"); ok && set && r == 0 {
		c := idemConflict{rule: "KD303", e: e, fatal: strict}
		if strict {
			c.msg = "retries=0 " + with + ": the producer throws ConfigException \"Must set retries to non-zero when using the idempotent producer.\""
		} else {
			c.msg = "retries=0 silently disables idempotence (on by default): the producer logs \"Idempotence will be disabled because retries is set to 0.\" and may write duplicates"
		}
		cs = append(cs, c)
	}
	if a, e, set, ok := v.javaAcks(); ok && set && a != -1 {
		c := idemConflict{rule: "KD302", e: e, fatal: strict}
		if strict {
			c.msg = fmt.Sprintf("acks=%s %s: the producer throws ConfigException \"Must set acks to all in order to use the idempotent producer.\"", strings.TrimSpace(e.Value), with)
		} else {
			c.msg = fmt.Sprintf("acks=%s silently disables idempotence (on by default, and it needs acks=all): the producer may write duplicates on retries", strings.TrimSpace(e.Value))
		}
		cs = append(cs, c)
	}
	if m, e, set, ok := v.javaInt("max.in.flight.requests.per.connection"); ok && set && m > 5 {
		c := idemConflict{rule: "KD304", e: e}
		switch {
		case strict:
			// Explicit (or 2.x): every version throws (2.x
			// configureInflightRequests, 3.9 and 4.x
			// postProcessAndValidateIdempotenceConfigs, userConfiguredIdempotence).
			c.fatal = true
			c.msg = fmt.Sprintf("max.in.flight.requests.per.connection=%d %s: the producer throws ConfigException \"Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent producer.\"", m, with)
		case v.version.AtLeast(4, 0):
			c.fatal = true
			c.msg = fmt.Sprintf("max.in.flight.requests.per.connection=%d with idempotence (on by default): Kafka 4.0 and later throw ConfigException \"To use the idempotent producer, max.in.flight.requests.per.connection must be set to at most 5.\" (3.x silently disabled idempotence)", m)
		default:
			c.msg = fmt.Sprintf("max.in.flight.requests.per.connection=%d silently disables idempotence in %s (a WARN; Kafka 4.0 and later refuse to start)", m, v.version)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		if !c.fatal {
			disabled = true
		}
	}
	return disabled, cs
}

func idempotenceRule(id, title, key, rationale string) *Rule {
	return &Rule{
		ID:       id,
		Title:    title,
		Severity: Error,
		Category: "crossfield",
		Rationale: rationale + " Idempotence is on by default since 3.0. When enable.idempotence=true is written " +
			"in the file, a conflict is a ConfigException and the producer does not start; when it is left at " +
			"its default, the producer logs a line and silently turns idempotence off (reported as a warning), " +
			"so retries may write duplicates and transactions are impossible. librdkafka (idempotence off by " +
			"default) fails to create the producer when enable.idempotence=true is set with a conflicting value " +
			"the user set.",
		Remediation: "Remove " + key + " (the defaults work with idempotence), or set enable.idempotence=false " +
			"explicitly if you do not want it.",
		Source: "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java " +
			"(postProcessAndValidateIdempotenceConfigs, 3.9 and trunk; userConfiguredIdempotence decides between " +
			"ConfigException and a log line); confluentinc/librdkafka CONFIGURATION.md enable.idempotence and " +
			"src/rdkafka_idempotence.c",
		Check: func(p *Pass) {
			if p.view.dialect == config.Librdkafka {
				checkLibIdempotence(p, id)
				return
			}
			_, cs := p.view.javaIdempotenceConflicts()
			for _, c := range cs {
				if c.rule != id {
					continue
				}
				sev := Warning
				if c.fatal {
					sev = Error
				}
				p.reportValue(c.e, sev, c.msg, "")
			}
		},
	}
}

var kd302 = idempotenceRule("KD302", "idempotence conflicts with acks (needs acks=all)", "acks",
	"The idempotent producer needs acks=all (-1): without the full ISR acknowledging, a retried batch can be lost or duplicated.")

var kd303 = idempotenceRule("KD303", "idempotence conflicts with retries=0", "retries",
	"The idempotent producer needs retries > 0: the sequence numbers exist to make retries safe.")

var kd304 = idempotenceRule("KD304", "idempotence conflicts with max.in.flight.requests.per.connection > 5",
	"max.in.flight.requests.per.connection",
	"The idempotent producer keeps ordering for at most 5 in-flight requests per connection. Kafka 3.x only "+
		"rejects more when enable.idempotence is set explicitly (otherwise it silently disables idempotence); "+
		"Kafka 4.0 and later reject it whenever idempotence is on, default included (KAFKA-17927), so a file "+
		"that worked on 3.9 stops the producer on 4.x (--kafka-version).")

// checkLibIdempotence applies KD302-KD304 to librdkafka: with
// enable.idempotence=true, a conflicting value the user set fails rd_kafka_new.
func checkLibIdempotence(p *Pass, id string) {
	v := p.view
	val, _, set, _ := v.libValue("enable.idempotence")
	if on, err := parseLibBool(val); !set || err != nil || !on {
		return
	}
	switch id {
	case "KD302":
		a, e, aset, _ := v.libValue("acks", "request.required.acks")
		if aset && !strings.EqualFold(a, "all") && a != "-1" {
			p.reportValue(e, Error, fmt.Sprintf("%s=%s with enable.idempotence=true: librdkafka fails to create the producer (idempotence needs acks=all)", name(e), a), "")
		}
	case "KD303":
		r, e, rset, _ := v.libValue("retries", "message.send.max.retries")
		if rset && r == "0" {
			p.reportValue(e, Error, name(e)+"=0 with enable.idempotence=true: librdkafka fails to create the producer (idempotence needs retries >= 1)", "")
		}
	case "KD304":
		m, e, mset, _ := v.libValue("max.in.flight.requests.per.connection", "max.in.flight")
		if n, err := strconv.Atoi(m); mset && err == nil && n > 5 {
			p.reportValue(e, Error, fmt.Sprintf("%s=%d with enable.idempotence=true: librdkafka fails to create the producer (at most 5)", name(e), n), "")
		}
	}
}

var kd305 = &Rule{
	ID:       "KD305",
	Title:    "transactional.id is set but idempotence is off",
	Severity: Error,
	Category: "crossfield",
	Rationale: "Transactions need the idempotent producer. The Java producer checks transactional.id after its " +
		"idempotence checks, so idempotence turned off explicitly (enable.idempotence=false) or silently (by " +
		"retries=0, acks other than all, or, in 3.x, more than 5 in-flight requests) ends in ConfigException " +
		"\"Cannot set a transactional.id without also enabling idempotence.\" librdkafka enables idempotence for " +
		"a transactional.id unless enable.idempotence=false is set, which is an error.",
	Remediation: "Remove enable.idempotence=false and the settings that conflict with idempotence, or remove " +
		"transactional.id.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (postProcessAndValidateIdempotenceConfigs: \"Cannot set a transactional.id without also enabling idempotence.\"); confluentinc/librdkafka CONFIGURATION.md transactional.id",
	Check: func(p *Pass) {
		v := p.view
		tx, ok := v.get("transactional.id")
		if !ok || strings.TrimSpace(tx.Value) == "" {
			return
		}
		if v.dialect == config.Librdkafka {
			val, e, set, _ := v.libValue("enable.idempotence")
			if on, err := parseLibBool(val); set && err == nil && !on {
				p.reportValue(e, 0, name(e)+"=false with transactional.id set: librdkafka refuses to create a transactional producer without idempotence", "")
			}
			return
		}
		on, ie, iset, ok := v.javaIdempotence()
		if !ok {
			return
		}
		if !on {
			at := tx
			if iset {
				at = ie
			}
			p.reportValue(at, 0, "transactional.id is set but enable.idempotence=false: the producer throws ConfigException \"Cannot set a transactional.id without also enabling idempotence.\"", "")
			return
		}
		disabled, cs := v.javaIdempotenceConflicts()
		if !disabled {
			return
		}
		var why []string
		for _, c := range cs {
			if !c.fatal {
				why = append(why, name(c.e)+"="+strings.TrimSpace(c.e.Value))
			}
		}
		p.reportValue(tx, 0, fmt.Sprintf("transactional.id is set but %s silently disables idempotence: the producer "+
			"throws ConfigException \"Cannot set a transactional.id without also enabling idempotence.\"", strings.Join(why, " and ")), "")
	},
}

var kd306 = &Rule{
	ID:       "KD306",
	Title:    "a SASL security.protocol with an empty sasl.mechanism",
	Severity: Error,
	Category: "crossfield",
	Rationale: "With security.protocol SASL_PLAINTEXT or SASL_SSL the Java client requires a mechanism and throws " +
		"ConfigException \"When the security.protocol configuration enables SASL, mechanism must be non-null " +
		"and non-empty string.\" when sasl.mechanism is written empty. (Left out entirely, it defaults to " +
		"GSSAPI, Kerberos: see KD307.)",
	Remediation: "Set sasl.mechanism to the broker's mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI.",
	Source:      "apache/kafka clients/src/main/java/org/apache/kafka/clients/CommonClientConfigs.java (postValidateSaslMechanismConfig, 3.3 and later; a 2.x client starts and fails to authenticate)",
	Dialects:    javaDialects,
	Check: func(p *Pass) {
		v := p.view
		if !v.version.AtLeast(3, 3) {
			return // postValidateSaslMechanismConfig came with 3.3
		}
		proto, _, _, _ := v.javaValue("security.protocol")
		if !isSASL(proto) {
			return
		}
		if e, ok := v.get("sasl.mechanism"); ok && strings.TrimSpace(e.Value) == "" {
			p.reportValue(e, 0, fmt.Sprintf("%s is empty with security.protocol=%s: the client throws ConfigException "+
				"(SASL needs a mechanism)", name(e), proto), "")
		}
	},
}

func isSASL(proto string) bool {
	p := strings.ToUpper(strings.TrimSpace(proto))
	return p == "SASL_PLAINTEXT" || p == "SASL_SSL"
}

// jaasModuleRE finds the login module class of a JAAS entry.
var jaasModuleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([A-Za-z_$][A-Za-z0-9_$.]*LoginModule)\b`) })

// mechanismsFor maps a login module to the SASL mechanisms it serves.
func mechanismsFor(module string) []string {
	switch {
	case strings.HasSuffix(module, ".PlainLoginModule") || module == "PlainLoginModule":
		return []string{"PLAIN"}
	case strings.HasSuffix(module, "ScramLoginModule"):
		return []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	case strings.HasSuffix(module, "OAuthBearerLoginModule"):
		return []string{"OAUTHBEARER"}
	case strings.HasSuffix(module, "Krb5LoginModule"):
		return []string{"GSSAPI"}
	}
	return nil
}

var kd307 = &Rule{
	ID:       "KD307",
	Title:    "SASL credentials do not match sasl.mechanism (GSSAPI by default)",
	Severity: Error,
	Category: "crossfield",
	Rationale: "sasl.mechanism defaults to GSSAPI (Kerberos) in the Java client and in librdkafka " +
		"(sasl.mechanisms). A file that sets security.protocol=SASL_SSL and a PLAIN or SCRAM sasl.jaas.config " +
		"but no sasl.mechanism therefore tries Kerberos with a PlainLoginModule, and authentication fails with " +
		"an error that does not mention the missing mechanism. The same goes for any login module that does " +
		"not serve the configured mechanism (PlainLoginModule with SCRAM-SHA-512, ScramLoginModule with PLAIN), " +
		"and for librdkafka's sasl.username/sasl.password under GSSAPI.",
	Remediation: "Set sasl.mechanism to the mechanism of the login module: PlainLoginModule: PLAIN; " +
		"ScramLoginModule: SCRAM-SHA-256 or SCRAM-SHA-512; OAuthBearerLoginModule: OAUTHBEARER; Krb5LoginModule: GSSAPI.",
	Source: "apache/kafka clients/src/main/java/org/apache/kafka/common/config/SaslConfigs.java (SASL_MECHANISM default GSSAPI); apache/kafka clients/src/main/java/org/apache/kafka/clients/ClientUtils.java (createChannelBuilder); confluentinc/librdkafka CONFIGURATION.md sasl.mechanisms (default GSSAPI)",
	Check: func(p *Pass) {
		v := p.view
		if v.dialect == config.Librdkafka {
			proto, _, _, _ := v.libValue("security.protocol")
			if !isSASL(proto) {
				return
			}
			mech, _, _, _ := v.libValue("sasl.mechanisms", "sasl.mechanism")
			if !strings.EqualFold(strings.TrimSpace(mech), "GSSAPI") {
				return
			}
			if e, _, ok := v.getAny("sasl.username", "sasl.password"); ok {
				p.reportKey(e, 0, fmt.Sprintf("%s is set but sasl.mechanisms is GSSAPI (%s): librdkafka tries "+
					"Kerberos and ignores the username/password", name(e), defaultOrSet(v, "sasl.mechanisms", "sasl.mechanism")), "")
			}
			return
		}
		proto, _, _, _ := v.javaValue("security.protocol")
		if !isSASL(proto) {
			return
		}
		jaas, ok := v.get("sasl.jaas.config")
		if !ok {
			return
		}
		m := jaasModuleRE().FindStringSubmatch(jaas.Value)
		if m == nil {
			return
		}
		want := mechanismsFor(m[1])
		if want == nil {
			return
		}
		mech, mechE, mechSet, _ := v.javaValue("sasl.mechanism")
		mech = strings.TrimSpace(mech)
		if mech == "" || containsString(want, mech) {
			return // empty: KD306
		}
		if containsFold(want, mech) {
			// The broker looks the client's mechanism up in its enabled
			// list exactly (SaslServerAuthenticator), so "plain" fails.
			p.reportValue(mechE, 0, fmt.Sprintf("%s: %q must be written %s: mechanism names are case-sensitive, and the broker rejects %q",
				name(mechE), mech, strings.ToUpper(mech), mech), fmt.Sprintf("Set sasl.mechanism=%s.", strings.ToUpper(mech)))
			return
		}
		how := "sasl.mechanism=" + mech
		if !mechSet {
			how = "sasl.mechanism is not set, so it is GSSAPI (Kerberos)"
		}
		p.reportValue(jaas, 0, fmt.Sprintf("sasl.jaas.config uses %s (for %s) but %s: authentication fails",
			shortClass(m[1]), strings.Join(want, " or "), how),
			fmt.Sprintf("Set sasl.mechanism=%s.", want[0]))
	},
}

func defaultOrSet(v *fileView, keys ...string) string {
	if _, _, ok := v.getAny(keys...); ok {
		return "as set"
	}
	return "the default"
}

func shortClass(c string) string {
	if i := strings.LastIndex(c, "."); i >= 0 {
		return c[i+1:]
	}
	return c
}

var kd308 = &Rule{
	PerEntry: true,
	ID:       "KD308",
	Title:    "acks is not all, -1, 0 or 1",
	Severity: Error,
	Category: "crossfield",
	Rationale: "The Java producer's acks validator accepts exactly \"all\", \"-1\", \"0\" and \"1\" (case-sensitive: " +
		"\"ALL\" is rejected) and throws ConfigException otherwise, so the producer does not start; acks=2 or " +
		"a count of replicas is not a thing a producer can ask for.",
	Remediation: "Use acks=all (the default since 3.0, and required by idempotence), or acks=1 / acks=0 if you accept losing data.",
	Source:      "apache/kafka clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java (ACKS_CONFIG: Type.STRING, \"all\", in(\"all\", \"-1\", \"0\", \"1\"); parseAcks)",
	Dialects:    javaDialects,
	Check: func(p *Pass) {
		for _, e := range p.Entries {
			if e.Key != "acks" || p.view.unknown(e) || p.view.shadowed(e) {
				continue
			}
			if ve := checkAcks(e); ve != nil {
				p.reportValue(e, 0, ve.Msg, "")
			}
		}
	},
}

// checkAcks is KD308's check of one acks entry; checkJavaValue (and so
// CheckJavaValue) uses it too, which the value rules then leave to KD308.
func checkAcks(e config.Entry) *ValueError {
	val := strings.TrimSpace(e.Value)
	if containsString([]string{"all", "-1", "0", "1"}, val) {
		return nil
	}
	hint := ""
	if strings.EqualFold(val, "all") {
		hint = " (values are case-sensitive: write all)"
	}
	return &ValueError{Rule: "KD308", Msg: fmt.Sprintf("%s: %q is not one of all, -1, 0, 1%s: the producer throws ConfigException", name(e), e.Value, hint)}
}
