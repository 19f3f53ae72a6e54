package rules

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/kdiag/kdiag/config"
)

// KD2xx: bootstrap.servers (librdkafka: metadata.broker.list, whose alias it is).

// bootstrapEntry is one host:port of a broker list, as the client parses it.
type bootstrapEntry struct {
	text string // as written, trimmed
	host string
	port int
	// bad says why the client rejects it ("" if it accepts it).
	bad string
	// warn says how the client reads it otherwise than it is written
	// (an older client's pattern drops what comes before the last
	// host:port).
	warn string
}

// javaHostPortRE is Kafka's Utils.HOST_PORT_PATTERN, which getHost/getPort
// match against the whole entry.
// listSepRE is ConfigDef's COMMA_WITH_WHITESPACE, which splits LIST values.
var listSepRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s*,\s*`) })

var javaHostPortRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)$`)
})

// javaHostPortOldRE is HOST_PORT_PATTERN before 3.8 (2.0 to 3.7):
// ".*?\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)", matched whole. Its ".*?"
// takes anything before the last host:port, so "a:9092 b:9092" is read as
// b:9092 alone.
var javaHostPortOldRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^.*?\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)$`)
})

// parseJavaBootstrap splits a bootstrap.servers value as ConfigDef splits a
// LIST (trim, then split on commas with surrounding whitespace) and checks
// each entry as ClientUtils.parseAndValidateAddresses does. Empty entries are
// skipped, as the client skips them.
func parseJavaBootstrap(val string) []bootstrapEntry { return parseJavaBootstrapAt(val, Version{4, 1}) }

// parseJavaBootstrapAt is parseJavaBootstrap as the client of version ver
// reads the list: before 3.8 with the old host:port pattern.
func parseJavaBootstrapAt(val string, ver Version) []bootstrapEntry {
	val = strings.TrimSpace(val)
	if val == "" {
		return nil
	}
	var out []bootstrapEntry
	for _, s := range listSepRE().Split(val, -1) {
		if s == "" {
			continue
		}
		be := bootstrapEntry{text: s}
		m := javaHostPortRE().FindStringSubmatch(s)
		if m == nil && !ver.AtLeast(3, 8) {
			if m = javaHostPortOldRE().FindStringSubmatch(s); m != nil {
				be.warn = fmt.Sprintf("a %s client reads %q as %s:%s, and drops what comes before it (its host:port pattern, before 3.8, "+
					"starts with .*?); 3.8 and later refuse the entry", ver, s, m[1], m[2])
			}
		}
		if m == nil {
			be.bad = "Invalid url in bootstrap.servers: " + s + " (want host:port)"
			out = append(out, be)
			continue
		}
		be.host = m[1]
		port, err := strconv.Atoi(m[2])
		if err != nil || port > 65535 {
			// Integer.parseInt overflow or InetSocketAddress's port check:
			// both are IllegalArgumentExceptions.
			be.bad = "Invalid port in bootstrap.servers: " + s + " (ports are 1 to 65535)"
		} else if port == 0 {
			// Java accepts port 0 but no broker listens there.
			be.bad = "port 0 in bootstrap.servers: " + s + " (the client accepts it, but no connection to port 0 succeeds)"
		}
		be.port = port
		if be.bad == "" && linkLocalNoZone(be.host) {
			be.bad = linkLocalText(s)
		}
		out = append(out, be)
	}
	return out
}

// linkLocalNoZone reports a link-local IPv6 address written without its
// zone (fe80::1, not fe80::1%eth0): on Linux connect(2) refuses it with
// EINVAL, as the address means nothing without the interface (the Java
// client, JDK 17, fails with "java.net.SocketException: Invalid argument").
func linkLocalNoZone(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == ""
}

func linkLocalText(entry string) string {
	return "link-local IPv6 address without an interface in bootstrap.servers: " + entry +
		" (the client takes it, but connect() fails with \"Invalid argument\": name the interface, as in [fe80::1%eth0]:9092)"
}

// isLinkLocal reports a link-local address (fe80::/10, 169.254.0.0/16):
// a host on this host's own link, not a remote one.
func isLinkLocal(host string) bool {
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsLinkLocalUnicast()
}

var libHostRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9A-Za-z\-._%]+$`) })

// parseLibBootstrap parses a librdkafka broker list: comma-separated
// [proto://]host[:port], the port defaulting to 9092, IPv6 in brackets.
func parseLibBootstrap(val string) []bootstrapEntry {
	var out []bootstrapEntry
	for _, s := range strings.FieldsFunc(val, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		be := bootstrapEntry{text: s, port: 9092}
		rest := s
		if i := strings.Index(rest, "://"); i >= 0 {
			rest = rest[i+3:]
		}
		hostPart, portPart := rest, ""
		if strings.HasPrefix(rest, "[") {
			j := strings.Index(rest, "]")
			if j < 0 {
				be.bad = "unclosed [ in IPv6 address: " + s
				out = append(out, be)
				continue
			}
			hostPart = rest[1:j]
			after := rest[j+1:]
			if after != "" {
				if !strings.HasPrefix(after, ":") {
					be.bad = "unexpected text after ]: " + s
					out = append(out, be)
					continue
				}
				portPart = after[1:]
			}
		} else if i := strings.LastIndex(rest, ":"); i >= 0 {
			if strings.Count(rest, ":") > 1 {
				be.bad = "IPv6 address without brackets: " + s + " (write [addr]:port)"
				out = append(out, be)
				continue
			}
			hostPart, portPart = rest[:i], rest[i+1:]
		}
		be.host = hostPart
		if _, err := netip.ParseAddr(hostPart); hostPart == "" || (!libHostRE().MatchString(hostPart) && err != nil) {
			be.bad = "invalid host in broker list: " + s
		} else if linkLocalNoZone(hostPart) {
			be.bad = strings.Replace(linkLocalText(s), "bootstrap.servers", "the broker list", 1)
		} else if portPart != "" || strings.HasSuffix(rest, ":") {
			p, err := strconv.Atoi(portPart)
			if err != nil || p < 1 || p > 65535 {
				be.bad = "invalid port in broker list: " + s + " (ports are 1 to 65535)"
			} else {
				be.port = p
			}
		}
		out = append(out, be)
	}
	return out
}

// bootstrapOf returns the broker-list entry of a file and its parsed entries.
// A value known only at run time (a placeholder) is not parsed: ok is
// false and known is true.
func (v *fileView) bootstrapOf() (e config.Entry, entries []bootstrapEntry, ok bool) {
	e, ok, known := v.bootstrapEntry()
	if !ok || !known {
		return e, nil, false
	}
	if v.dialect == config.Librdkafka {
		return e, parseLibBootstrap(e.Value), true
	}
	return e, parseJavaBootstrapAt(e.Value, v.version), true
}

// bootstrapEntry is the broker list's entry: set says the file sets it,
// known that its value is known here.
func (v *fileView) bootstrapEntry() (e config.Entry, set, known bool) {
	if v.dialect == config.Librdkafka {
		e, _, set = v.getAny("bootstrap.servers", "metadata.broker.list")
	} else {
		e, set = v.get("bootstrap.servers")
	}
	return e, set, set && !v.unknown(e)
}

var kd201 = &Rule{
	ID:       "KD201",
	Title:    "bootstrap.servers is missing or empty",
	Severity: Error,
	Category: "bootstrap",
	Rationale: "The producer needs at least one broker address to fetch its first metadata. The Java client " +
		"refuses to start without one: in 3.9 and 4.0 bootstrap.servers defaults to an empty list and " +
		"KafkaProducer fails with \"No resolvable bootstrap urls given in bootstrap.servers\"; in trunk it has " +
		"no default and an empty list is rejected by its validator. An empty librdkafka broker list leaves the " +
		"client with no broker until the application calls rd_kafka_brokers_add(). (A Spring Boot file without " +
		"spring.kafka.bootstrap-servers gets Spring's default localhost:9092, so only an empty value is " +
		"reported there; a librdkafka file without a broker list is not reported, as the application may add " +
		"brokers itself.)",
	Remediation: "Set bootstrap.servers to two or three brokers of the cluster, host:port, comma-separated.",
	Source: "apache/kafka ClientUtils.parseAndValidateAddresses (\"No resolvable bootstrap urls given in " +
		"bootstrap.servers\"); ProducerConfig BOOTSTRAP_SERVERS_CONFIG; ConfigDef.ValidList.anyNonDuplicateValues " +
		"(trunk); confluentinc/librdkafka CONFIGURATION.md metadata.broker.list",
	Check: func(p *Pass) {
		v := p.view
		e, entries, ok := v.bootstrapOf()
		if !ok {
			if _, set, _ := v.bootstrapEntry(); set || p.File.Partial {
				return // a placeholder (known at run time), or the rest of the config is elsewhere
			}
			if v.dialect == config.Java {
				p.reportFile("bootstrap.servers", 0, "bootstrap.servers is not set: the Java producer cannot start without "+
					"a broker to bootstrap from", "")
			}
			return
		}
		if len(entries) == 0 {
			p.reportValue(e, 0, name(e)+" is empty: the producer has no broker to bootstrap from", "")
		}
	},
}

var kd202 = &Rule{
	ID:       "KD202",
	Title:    "bootstrap.servers has a malformed host:port or port",
	Severity: Error,
	Category: "bootstrap",
	Rationale: "The Java client matches every entry against host:port (an optional scheme://, IPv6 in brackets) " +
		"and throws ConfigException \"Invalid url in bootstrap.servers\" or \"Invalid port in bootstrap.servers\" " +
		"when one does not parse, so the producer does not start. Entries are separated by commas only: " +
		"\"a:9092 b:9092\" is one invalid entry. librdkafka takes host or host:port (the port defaults to " +
		"9092) and fails to add a broker whose address does not parse. Two entries parse but never connect: " +
		"port 0, and a link-local IPv6 address without its interface ([fe80::1]:9092, where connect() fails with " +
		"EINVAL, \"Invalid argument\"; [fe80::1%eth0]:9092 names the interface).",
	Remediation: "Write each broker as host:port (IPv6 as [addr]:port), separated by commas.",
	Source: "apache/kafka ClientUtils.parseAndValidateAddresses and Utils.HOST_PORT_PATTERN/getHost/getPort (3.8 and later; " +
		"before 3.8 the pattern began with .*?, which takes what comes before the last host:port); " +
		"confluentinc/librdkafka CONFIGURATION.md metadata.broker.list (\"CSV list of broker host or host:port\")",
	Check: func(p *Pass) {
		e, entries, ok := p.view.bootstrapOf()
		if !ok {
			return
		}
		for _, be := range entries {
			switch {
			case be.bad != "":
				p.reportValue(e, 0, name(e)+": "+be.bad, "")
			case be.warn != "":
				p.reportValue(e, Warning, name(e)+": "+be.warn, "Separate the brokers with commas.")
			}
		}
	},
}

var kd203 = &Rule{
	ID:       "KD203",
	Title:    "bootstrap.servers names a single broker",
	Severity: Info,
	Category: "bootstrap",
	Rationale: "The client bootstraps from the listed addresses only. With one entry, a producer that starts " +
		"while that broker is down (a rolling restart, a failed node) cannot fetch metadata and cannot start, " +
		"although the rest of the cluster is up. A single DNS name that resolves to several brokers (with " +
		"client.dns.lookup=use_all_dns_ips, the default) or a bootstrap load balancer avoids this, which is " +
		"why this is only a note.",
	Remediation: "List two or three brokers (in different racks or zones), or a DNS name that resolves to several.",
	Source: "apache/kafka ClientUtils.parseAndValidateAddresses, NetworkClient bootstrap; ProducerConfig " +
		"CLIENT_DNS_LOOKUP_CONFIG (use_all_dns_ips)",
	Check: func(p *Pass) {
		e, entries, ok := p.view.bootstrapOf()
		if !ok || len(entries) != 1 || entries[0].bad != "" {
			return
		}
		p.reportValue(e, 0, fmt.Sprintf("%s names one broker (%s): while it is down the producer cannot bootstrap",
			name(e), entries[0].text), "")
	},
}

var kd204 = &Rule{
	ID:       "KD204",
	Title:    "bootstrap.servers lists the same broker twice",
	Severity: Warning,
	Category: "bootstrap",
	Rationale: "A repeated entry adds nothing and usually hides a copy-and-paste slip (the broker meant to be " +
		"there is missing). Kafka trunk's validator for bootstrap.servers " +
		"(ValidList.anyNonDuplicateValues) rejects exact duplicates with ConfigException \"Configuration " +
		"'bootstrap.servers' values must not be duplicated.\"; 3.9 and 4.0 accept them. Entries that differ " +
		"only in case, scheme or (librdkafka) an implicit :9092 are the same broker too.",
	Remediation: "Remove the repeated entry, and check that no broker is missing from the list.",
	Source:      "apache/kafka ConfigDef.ValidList.ensureValid (trunk); ClientUtils.parseAndValidateAddresses",
	Check: func(p *Pass) {
		e, entries, ok := p.view.bootstrapOf()
		if !ok {
			return
		}
		seen := map[string]string{}
		for _, be := range entries {
			if be.bad != "" {
				continue
			}
			k := strings.ToLower(be.host) + ":" + strconv.Itoa(be.port)
			if first, dup := seen[k]; dup {
				p.reportValue(e, 0, fmt.Sprintf("%s lists %s twice (as %q and %q)", name(e), k, first, be.text), "")
				continue
			}
			seen[k] = be.text
		}
	},
}

// maxBootstrap is how many bootstrap entries are enough: the list only serves
// the first metadata request, and three or four brokers survive any single
// failure; longer lists go stale as brokers are replaced.
const maxBootstrap = 4

var kd205 = &Rule{
	ID:       "KD205",
	Title:    "bootstrap.servers lists more than 4 brokers",
	Severity: Info,
	Category: "bootstrap",
	Rationale: "bootstrap.servers only serves the first metadata request (and re-bootstrapping); after that the " +
		"client uses the brokers the metadata names. Three or four entries survive the loss of any one or two " +
		"brokers; every further entry is one more address to keep up to date, and long lists go stale as " +
		"brokers are replaced, pointing new producers at hosts that no longer exist.",
	Remediation: "Keep three or four brokers (in different racks or zones), or use one DNS name for the cluster.",
	Source: "apache/kafka CommonClientConfigs.BOOTSTRAP_SERVERS_DOC (\"this list need not contain the full set of " +
		"servers\"); NetworkClient bootstrap",
	Check: func(p *Pass) {
		e, entries, ok := p.view.bootstrapOf()
		if !ok || len(entries) <= maxBootstrap {
			return
		}
		p.reportValue(e, 0, fmt.Sprintf("%s lists %d brokers: three or four are enough to bootstrap, and long lists go stale", name(e), len(entries)), "")
	},
}

func isLoopback(host string) bool {
	h := strings.ToLower(strings.Trim(host, "[]"))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "localhost.localdomain" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

var kd206 = &Rule{
	ID:       "KD206",
	Title:    "bootstrap.servers mixes localhost with remote hosts",
	Severity: Warning,
	Category: "bootstrap",
	Rationale: "A loopback address (localhost, 127.0.0.0/8, ::1) next to remote brokers is almost always a " +
		"leftover from local testing. Depending on which entry the client picks first, producers either " +
		"bootstrap from a broker on their own host (another cluster, or nothing) or waste their first attempts " +
		"on a dead address. A link-local address (fe80::/10, 169.254.0.0/16) is on the host's own link, not a " +
		"remote host, and does not count as one.",
	Remediation: "Remove the loopback entries from a configuration meant for a remote cluster (or the remote ones " +
		"from a local one).",
	Source: "apache/kafka ClientUtils.parseAndValidateAddresses (every entry is resolved and used)",
	Check: func(p *Pass) {
		e, entries, ok := p.view.bootstrapOf()
		if !ok {
			return
		}
		var local, remote []string
		for _, be := range entries {
			if be.bad != "" || be.host == "" {
				continue
			}
			switch {
			case isLoopback(be.host):
				local = append(local, be.text)
			case isLinkLocal(be.host):
				// On this host's own link: neither the loopback
				// leftover nor a remote broker this rule is about.
			default:
				remote = append(remote, be.text)
			}
		}
		if len(local) > 0 && len(remote) > 0 {
			p.reportValue(e, 0, fmt.Sprintf("%s mixes loopback %s with remote %s", name(e),
				strings.Join(local, ", "), strings.Join(remote, ", ")), "")
		}
	},
}
