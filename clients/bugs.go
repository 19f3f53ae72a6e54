package clients

//go:generate go run ./genbugs -out ../docs/known-bugs.md

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KnownBug is one connection or fd bug of a client library, by version:
// what goes wrong, which releases have it, the first release without it,
// what it leaves on a host in kdiag's terms, and where each fact can be
// checked. Every entry was verified at its source: the fixing commit read
// in the library's repository and the first release tag that contains it.
type KnownBug struct {
	// ID is "<library>-<number>": the number of the issue that reported
	// it, or of the pull request when no issue was filed (sarama-3143,
	// franz-go-1348); for the Java client, the Apache JIRA key
	// (KAFKA-6101).
	ID string
	// Library is the catalog ID (Sarama, Librdkafka, ...): the bug is
	// matched against Client.Version when Client.Library is this.
	Library string
	Title   string
	// Affected is the first affected release; the range ends before
	// Fixed.
	Affected AffectedRange
	// Fixed is the first release that holds the fix: the earliest
	// release tag (not a pre-release) that contains the fixing commit,
	// written as Client.Version writes versions of the library.
	Fixed string
	// FixDate is the author date of the earliest fixing commit: a build
	// of a commit made before it cannot hold the fix (Go
	// pseudo-versions are placed by it).
	FixDate time.Time
	// Symptom is what doctor can look for; SymptomWords says how it
	// shows for this bug.
	Symptom      Symptom
	SymptomWords string
	// Sources are the issue, pull request, commits and JIRA entries
	// behind the entry.
	Sources []BugRef
	// Notes says what the fix changed and what to do on an affected
	// version.
	Notes string
}

// AffectedRange is where a bug's affected releases start.
type AffectedRange struct {
	// From is the first affected release, "" when the release that
	// introduced the behaviour was not found: then every release before
	// Fixed is affected.
	From string
	// Basis says how From was established (the commit that introduced
	// the behaviour and the first release with it), or why it is not
	// known.
	Basis string
}

// Range writes the affected releases: ">= v1.27.1, < v1.33.0", or
// "< v1.48.0" when the introducing release is not known.
func (b KnownBug) Range() string {
	if b.Affected.From == "" {
		return "< " + b.Fixed
	}
	return ">= " + b.Affected.From + ", < " + b.Fixed
}

// FixCommit returns the first commit source marked as the fix.
func (b KnownBug) FixCommit() (BugRef, bool) {
	for _, r := range b.Sources {
		if r.Kind == RefCommit && r.Fix {
			return r, true
		}
	}
	return BugRef{}, false
}

// Symptom is what a known bug leaves on a host, in terms kdiag can see: a
// small closed set that doctor matches its findings against.
type Symptom string

// The symptoms the catalog's entries need (TestKnownBugCatalog checks
// that each is used).
const (
	// SymptomHeldClose: TCP sockets in CLOSE, ended by the kernel after
	// a reset or an error, that the process still holds open (kdiag's
	// held CLOSE).
	SymptomHeldClose Symptom = "held-close"
	// SymptomCloseWaitLeak: CLOSE_WAIT toward brokers that grows and
	// never ends: connections the client dropped without closing.
	SymptomCloseWaitLeak Symptom = "close-wait-leak"
	// SymptomSeedCloseWait: connections toward the seed (bootstrap)
	// addresses left behind and growing.
	SymptomSeedCloseWait Symptom = "seed-close-wait"
	// SymptomIdleCloseWait: CLOSE_WAIT from the broker's idle close, on
	// connections idle longer than the client's own idle timeout.
	SymptomIdleCloseWait Symptom = "idle-close-wait"
	// SymptomFDGrowth: the process's fds (sockets, pipes, epoll) grow
	// with each client created and closed.
	SymptomFDGrowth Symptom = "fd-growth"
	// SymptomConnectionsToAllBrokers: a connection to every broker of
	// the cluster per client instance, used or not.
	SymptomConnectionsToAllBrokers Symptom = "connections-to-all-brokers"
	// SymptomReconnectChurn: connections to a broker replaced again and
	// again while the broker is up.
	SymptomReconnectChurn Symptom = "reconnect-churn"
	// SymptomReconnectStorm: connection attempts toward an unreachable
	// broker at a short fixed interval.
	SymptomReconnectStorm Symptom = "reconnect-storm"
	// SymptomSelectLimit: an fd numbered near or past select()'s
	// FD_SETSIZE (1024) in a client that polls with select().
	SymptomSelectLimit Symptom = "select-fd-limit"
)

// symptomWords says what each symptom looks like in kdiag's output.
var symptomWords = map[Symptom]string{
	SymptomHeldClose:               "held CLOSE sockets: TCP sockets the kernel has ended after a reset or an error (state CLOSE, in no kernel table) that the process's fds still hold",
	SymptomCloseWaitLeak:           "CLOSE_WAIT toward brokers that keeps growing and never drains: connections the client dropped without closing, closed since by the broker",
	SymptomSeedCloseWait:           "connections toward the seed (bootstrap) addresses left behind and growing: ESTABLISHED, then CLOSE_WAIT after the broker's idle close",
	SymptomIdleCloseWait:           "CLOSE_WAIT from the broker's idle close on connections idle longer than the client's own idle timeout",
	SymptomFDGrowth:                "the process's fds grow with each client instance created and closed (sockets, pipes, eventfds, epoll fds) toward its RLIMIT_NOFILE",
	SymptomConnectionsToAllBrokers: "a connection to every broker of the cluster per client instance, whether or not it talks to that broker",
	SymptomReconnectChurn:          "new connections to the same broker again and again while it is up: connections opened per minute, TIME_WAIT toward the broker",
	SymptomReconnectStorm:          "connection attempts toward an unreachable broker at a short fixed interval, with no backoff: SYN_SENT and refused connects at a steady high rate",
	SymptomSelectLimit:             "the process's highest fd number near or past 1023: select() takes only fds below FD_SETSIZE (1024), whatever RLIMIT_NOFILE allows, so a client that polls with select() fails once a socket gets a number that high",
}

// Describe says what the symptom looks like in kdiag's output, "" for a
// value outside the set.
func (s Symptom) Describe() string { return symptomWords[s] }

// Symptoms returns every symptom of the set, sorted.
func Symptoms() []Symptom {
	out := make([]Symptom, 0, len(symptomWords))
	for s := range symptomWords {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// RefKind is the kind of a BugRef.
type RefKind string

// Kinds of sources.
const (
	RefIssue  RefKind = "issue"
	RefPR     RefKind = "pull request"
	RefCommit RefKind = "commit"
	RefJira   RefKind = "JIRA"
)

// BugRef is one source of a known bug: an issue, a pull request or a
// commit in a GitHub repository, or an Apache JIRA entry.
type BugRef struct {
	Kind RefKind
	// Repo is the GitHub repository, "IBM/sarama"; "" for a JIRA key.
	Repo string
	// ID is the issue or pull request number, the full commit hash, or
	// the JIRA key.
	ID string
	// Fix marks the pull requests and commits that make the fix.
	Fix bool
	// Says what it is, in a few words.
	Says string
}

// URL returns where the source can be read.
func (r BugRef) URL() string {
	switch r.Kind {
	case RefIssue:
		return "https://github.com/" + r.Repo + "/issues/" + r.ID
	case RefPR:
		return "https://github.com/" + r.Repo + "/pull/" + r.ID
	case RefCommit:
		return "https://github.com/" + r.Repo + "/commit/" + r.ID
	case RefJira:
		return "https://issues.apache.org/jira/browse/" + r.ID
	}
	return ""
}

// String writes "IBM/sarama#3143", "IBM/sarama@8eafc46589bd" or
// "KAFKA-6101".
func (r BugRef) String() string {
	switch r.Kind {
	case RefIssue, RefPR:
		return r.Repo + "#" + r.ID
	case RefCommit:
		id := r.ID
		if len(id) > 12 {
			id = id[:12]
		}
		return r.Repo + "@" + id
	}
	return r.ID
}

func issue(repo, n, says string) BugRef {
	return BugRef{Kind: RefIssue, Repo: repo, ID: n, Says: says}
}

func fixPR(repo, n, says string) BugRef {
	return BugRef{Kind: RefPR, Repo: repo, ID: n, Fix: true, Says: says}
}

func pr(repo, n, says string) BugRef {
	return BugRef{Kind: RefPR, Repo: repo, ID: n, Says: says}
}

func fixCommit(repo, hash, says string) BugRef {
	return BugRef{Kind: RefCommit, Repo: repo, ID: hash, Fix: true, Says: says}
}

func commit(repo, hash, says string) BugRef {
	return BugRef{Kind: RefCommit, Repo: repo, ID: hash, Says: says}
}

// date reads an RFC 3339 time, as git log --format=%aI writes a commit's
// author date; the catalog's dates are constants that TestKnownBugCatalog
// checks.
func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// The repositories of the catalog's sources.
const (
	saramaRepo      = "IBM/sarama"
	kafkaGoRepo     = "segmentio/kafka-go"
	franzRepo       = "twmb/franz-go"
	librdkafkaRepo  = "confluentinc/librdkafka"
	kafkaPythonRepo = "dpkp/kafka-python"
	apacheKafkaRepo = "apache/kafka"
)

// knownBugs is the catalog, sorted by library and then by number
// (TestKnownBugCatalog checks). Each entry was verified in the library's
// repository (the fetched snapshot: git log, git show, git tag --contains
// sorted by version), the threads read for what was reported.
var knownBugs = []KnownBug{
	{
		ID: "franz-go-1231", Library: FranzGo,
		Title: "A connection idle past ConnIdleTimeout is still reused until the reaper's next tick, up to 2x the timeout",
		Affected: AffectedRange{From: "v0.6.11",
			Basis: "ConnIdleTimeout and the connection reaper came in v0.6.11 (commit 46138f7e27fb); the reaper ticks every ConnIdleTimeout and loadConnection did not check idleness"},
		Fixed: "v1.20.7", FixDate: date("2026-02-10T23:19:06Z"),
		Symptom:      SymptomIdleCloseWait,
		SymptomWords: "CLOSE_WAIT from the broker's idle close on connections idle longer than kgo.ConnIdleTimeout: with the timeout set near the broker's connections.max.idle.ms the broker closes first, and the next request on that connection fails and is retried",
		Sources: []BugRef{
			issue(franzRepo, "1231", "Idle connection handling and connections.max.idle.ms"),
			fixPR(franzRepo, "1245", "kgo: do not reuse idle connection after connIdleTimeout (merged as aacd64af7f5e)"),
			fixCommit(franzRepo, "e8a00cd6c2b3f993b509ef317cc048b6d73b6d9e", "kgo: do not reuse idle connection after connIdleTimeout"),
			pr(franzRepo, "1242", "kgo: cap reap ticker interval at 20s (not merged)"),
		},
		Notes: "v1.20.7 kills a connection idle past ConnIdleTimeout instead of reusing it (brokerCxn.isIdleTimeout in loadConnection), raises the default from 20s to 30s and lowers the minimum to 100ms. The reaper still ticks every ConnIdleTimeout, so a connection the broker closed can wait up to 2x the timeout in CLOSE_WAIT, but it is no longer written to.",
	},
	{
		ID: "franz-go-1348", Library: FranzGo,
		Title: "The ApiVersions reset retry (the Azure Event Hubs workaround) abandons the reset connection without closing it",
		Affected: AffectedRange{From: "v1.19.4",
			Basis: "the retry came with commit 7910f6b6efdd (closing issue #1022), first released in v1.19.4"},
		Fixed: "v1.21.4", FixDate: date("2026-06-12T00:47:21-06:00"),
		Symptom:      SymptomHeldClose,
		SymptomWords: "a held CLOSE socket toward the broker for each ApiVersions request it reset (Azure Event Hubs resets ApiVersions v4 and later), open until Go's finalizer closes it; HookBrokerDisconnect never fires for it",
		Sources: []BugRef{
			fixPR(franzRepo, "1348", "audit fixes (merged as 5b5fa2846a33)"),
			fixCommit(franzRepo, "c0f89d33b62cd0e5a11d28deb2f77805feb44a35", "kgo: close abandoned connections in the ApiVersions-reset retry, and retry at max version as documented"),
			commit(franzRepo, "7910f6b6efdd40abb62a911f20d5d02c11623007", "introduced it: retry connection reset by peer from ApiVersions to work around EventHubs"),
			issue(franzRepo, "1022", "the issue the ApiVersions reset retry closed"),
		},
		Notes: "The fix closes the reset connection before retrying, and retries at the maximum version twice before falling back to v0 (the affected versions fell back to v0 at the first retry). Only brokers that reset the connection on ApiVersions are concerned.",
	},
	{
		ID: "KAFKA-6101", Library: KafkaClients,
		Title: "Reconnect backoff does not grow: reconnect.backoff.max.ms is ignored and a down broker is redialled every reconnect.backoff.ms",
		Affected: AffectedRange{From: "0.11.0.0",
			Basis: "exponential reconnect backoff (KIP-144, KAFKA-3878, commit b31df613f266) first shipped in 0.11.0.0, and ClusterConnectionStates.connecting reset the failure count at every attempt"},
		Fixed: "1.0.0", FixDate: date("2017-10-23T15:52:30+01:00"),
		Symptom:      SymptomReconnectStorm,
		SymptomWords: "connection attempts toward an unreachable broker every reconnect.backoff.ms (50 ms by default) per client, never backing off: SYN_SENT and refused connects toward that broker at a steady high rate",
		Sources: []BugRef{
			{Kind: RefJira, ID: "KAFKA-6101", Says: "Reconnecting to broker does not exponentially backoff"},
			fixPR(apacheKafkaRepo, "4118", "KAFKA-6101 Reconnecting to broker does not exponentially backoff"),
			fixCommit(apacheKafkaRepo, "505fd05911f4c044c47599b44369a0aedb435532", "the fix on the 1.0 branch, in 1.0.0"),
			fixCommit(apacheKafkaRepo, "277fc927c0d6c2699b64a5a54461fb96a50f58ae", "the fix on trunk, first in 1.1.0"),
			commit(apacheKafkaRepo, "b31df613f2664a8dc699b421b392f0aca9d5f83f", "KAFKA-3878: exponential backoff via reconnect.backoff.max (KIP-144)"),
		},
		Notes: "0.11.0.x releases were not fixed (the fix is not in 0.11.0.2): move to 1.0.0 or later.",
	},
	{
		ID: "kafka-go-258", Library: KafkaGo,
		Title: "Reader drops its partition connection after every fetch and dials a new one",
		Affected: AffectedRange{
			Basis: "introduction not pinned; before v0.3.4 the Reader closed the connection at each batch's end (issue #258); v0.3.4 and v0.3.5 (PR #353, commit 5341c5f0d30d) stopped closing it but still left the read loop, so each fetch dialled a new connection and left the old one open until Go's finalizer closed it"},
		Fixed: "v0.3.6", FixDate: date("2020-03-11T11:35:03-07:00"),
		Symptom:      SymptomReconnectChurn,
		SymptomWords: "a new connection to the partition leader for each fetch: connections opened per minute in step with the fetch rate, with TIME_WAIT toward the broker piling up (before v0.3.4) or the old sockets left open for the garbage collector (v0.3.4, v0.3.5)",
		Sources: []BugRef{
			issue(kafkaGoRepo, "258", "Seeing a lot of EOF errors when reading from partitions"),
			pr(kafkaGoRepo, "353", "Handle end of fetched batches of messages gracefully (v0.3.4: stopped closing, still redialled)"),
			commit(kafkaGoRepo, "5341c5f0d30d2df03d120e35f89f9c509cefa55c", "Handle end of fetched batches of messages gracefully (#353)"),
			fixPR(kafkaGoRepo, "409", "Don't close connection when end of batch is read correctly"),
			fixCommit(kafkaGoRepo, "efce7b6e0bf4da4d8a76aaf26fac880a023396d1", "Don't close connection when end of batch is read correctly (#409)"),
		},
		Notes: "Only the Reader (a consumer) is concerned. From v0.3.6 the end of a batch (io.EOF) keeps the read loop on the same connection.",
	},
	{
		ID: "kafka-python-552", Library: KafkaPython,
		Title: "KafkaClient never closes its wake pipe, and reference cycles keep closed clients from being freed",
		Affected: AffectedRange{From: "1.0.0",
			Basis: "the async KafkaClient (kafka/client_async.py) and its os.pipe() wake fds were first released in 1.0.0"},
		Fixed: "1.0.1", FixDate: date("2016-02-16T21:30:38-08:00"),
		Symptom:      SymptomFDGrowth,
		SymptomWords: "two pipe fds per consumer or producer created, never released: the fd count grows until select() fails with \"filedescriptor out of range in select()\" at fd 1024",
		Sources: []BugRef{
			issue(kafkaPythonRepo, "552", "KafkaClient leaks file descriptors"),
			fixPR(kafkaPythonRepo, "553", "break up some circular references and close client wake pipe on __del__ (merged as bcdefd698d03)"),
			fixCommit(kafkaPythonRepo, "d7522b0fb79bffbe10a2548658a48829dd1a5c33", "break up some circular references and close client wake pipe on __del__"),
		},
		Notes: "1.0.1 closes the pipe in KafkaClient.__del__ and breaks the cycles that kept clients alive; the bootstrap socket and the wake fds still leaked until 1.2.0 (kafka-python-689).",
	},
	{
		ID: "kafka-python-613", Library: KafkaPython,
		Title: "KafkaClient polls its sockets with select.select(): an fd numbered 1024 or higher fails every poll",
		Affected: AffectedRange{From: "1.0.0",
			Basis: "the async KafkaClient (kafka/client_async.py), whose _poll calls select.select, was first released in 1.0.0; 0.9.x read blocking sockets without select"},
		Fixed: "1.1.0", FixDate: date("2016-04-07T16:26:22-07:00"),
		Symptom:      SymptomSelectLimit,
		SymptomWords: "ValueError: filedescriptor out of range in select() from the producer's network thread, at every poll once a socket of the process is numbered 1024 or higher, however high ulimit -n is",
		Sources: []BugRef{
			issue(kafkaPythonRepo, "613", "KafkaProducer fails when many sockets are opened"),
			issue(kafkaPythonRepo, "622", "help: filedescriptor out of range in select"),
			fixCommit(kafkaPythonRepo, "237bd730fd29a105b6aabdc0262a694fb7c8f510", "Use selectors module in KafkaClient"),
		},
		Notes: "1.1.0 polls through the selectors module (epoll on Linux), which has no FD_SETSIZE bound; BrokerConnection.recv's own select() went in the same release.",
	},
	{
		ID: "kafka-python-689", Library: KafkaPython,
		Title: "A closed KafkaClient leaves its bootstrap socket and its wake socket pair open",
		Affected: AffectedRange{From: "1.0.0",
			Basis: "from 1.0.0, KafkaClient._bootstrap dropped the bootstrap connection that found brokers without closing it"},
		Fixed: "1.2.0", FixDate: date("2016-05-22T17:14:43-07:00"),
		Symptom:      SymptomFDGrowth,
		SymptomWords: "a socket toward a bootstrap server and a socket pair per KafkaProducer or KafkaConsumer created and closed: the fds grow with each client until \"Too many open files\" (the issue's producer-per-batch loop)",
		Sources: []BugRef{
			issue(kafkaPythonRepo, "689", "Creating multiple KafkaProducer instances results in 'Too many open files' error"),
			fixPR(kafkaPythonRepo, "696", "Fix socket leaks in KafkaClient"),
			fixCommit(kafkaPythonRepo, "77cb35078a7408ebb0eab4bfc2220cc11c10d3b2", "Fix socket leaks in KafkaClient (#696)"),
		},
		Notes: "1.2.0 closes the bootstrap connection once it has usable metadata and closes the wake sockets in close() (they were closed only in __del__, which a reference cycle kept from running).",
	},
	{
		ID: "kafka-python-729", Library: KafkaPython,
		Title: "KafkaClient.close() leaves its selector, an epoll fd, open",
		Affected: AffectedRange{From: "1.1.0",
			Basis: "KafkaClient polls through a selectors selector from 1.1.0 (1.0.x called select.select)"},
		Fixed: "1.2.2", FixDate: date("2016-06-17T14:24:00-07:00"),
		Symptom:      SymptomFDGrowth,
		SymptomWords: "one epoll fd (anon_inode:[eventpoll]) left per client closed, growing with each producer or consumer created and closed",
		Sources: []BugRef{
			fixPR(kafkaPythonRepo, "729", "Close selector when closing the client connection to fix fd leak"),
			fixCommit(kafkaPythonRepo, "5b9c55817b76eab8346f65e7c973c518d1e82409", "Close selector when closing the client connection to fix fd leak. (#729)"),
		},
		Notes: "1.2.2 closes the selector in KafkaClient.close().",
	},
	{
		ID: "kafka-python-1425", Library: KafkaPython,
		Title: "BrokerConnection.check_version leaves a selector, an epoll fd, open at every call",
		Affected: AffectedRange{From: "1.4.0",
			Basis: "check_version creates a selector from commit e3b1ad24b80d (Move callback processing from BrokerConnection to KafkaClient), first released in 1.4.0"},
		Fixed: "1.4.2", FixDate: date("2018-03-09T10:28:19-05:00"),
		Symptom:      SymptomFDGrowth,
		SymptomWords: "one epoll fd per broker version probe, that is per KafkaProducer, KafkaConsumer or KafkaAdminClient created without api_version: the fds grow with the clients created",
		Sources: []BugRef{
			fixPR(kafkaPythonRepo, "1425", "Close leaked selector in version check"),
			fixCommit(kafkaPythonRepo, "d90cf22bcf5c49b6d75cac4282d7cc2ae973651c", "Close leaked selector in version check (#1425)"),
			commit(kafkaPythonRepo, "e3b1ad24b80dd60e3159566740f40fc6f5811070", "introduced it: Move callback processing from BrokerConnection to KafkaClient"),
		},
		Notes: "KafkaClient probes the broker version at creation when api_version is None; setting api_version skips the probe on affected versions.",
	},
	{
		ID: "librdkafka-1561", Library: Librdkafka,
		Title: "Connects to every broker of the cluster, with a broker thread each, whatever it produces to or consumes from",
		Affected: AffectedRange{
			Basis: "introduction not pinned: dense connections were the only mode before 1.0.0 (issue #825 tracked sparse connections from 2016)"},
		Fixed: "1.0.0", FixDate: date("2018-09-22T15:05:24+02:00"),
		Symptom:      SymptomConnectionsToAllBrokers,
		SymptomWords: "an ESTABLISHED connection and an rdk:broker thread per broker in the metadata, per handle, whether or not it talks to that broker; the broker's idle close of the unused ones, then a reconnect",
		Sources: []BugRef{
			issue(librdkafkaRepo, "1561", "is there a switch to stop the broker bootstrap (only connect the brokers i config)?"),
			fixPR(librdkafkaRepo, "2019", "Sparse/on-demand connections"),
			fixCommit(librdkafkaRepo, "2aa591f9029da19724f21f25c4c91580e4893789", "Added support for sparse/on-demand connections (#825)"),
			fixCommit(librdkafkaRepo, "067ebdce977c95e1e9b657e643733fb4ddfdae89", "same PR: enable.sparse.connections defaults to true"),
		},
		Notes: "From 1.0.0 a client connects only to the brokers it needs (enable.sparse.connections=true, a hidden property from v1.0.0-RC8 on; false brings the old behaviour back).",
	},
	{
		ID: "librdkafka-3109", Library: Librdkafka,
		Title: "No client-side idle close: connections idle past a load balancer's timeout (Azure: 4 minutes, dropped silently) fail at their next request",
		Affected: AffectedRange{
			Basis: "introduction not pinned: librdkafka had no connections.max.idle.ms before 1.7.0"},
		Fixed: "1.7.0", FixDate: date("2021-03-08T19:39:48+01:00"),
		Symptom:      SymptomReconnectChurn,
		SymptomWords: "after each idle period a request times out (\"1 request(s) timed out: disconnect\") and the connection is redialled: connections to the same broker replaced about once per idle period",
		Sources: []BugRef{
			issue(librdkafkaRepo, "3109", "Robustness and resiliency on Azure"),
			fixPR(librdkafkaRepo, "3286", "Add connections.max.idle.ms"),
			fixCommit(librdkafkaRepo, "c13260803a8da0a282d1e1f030dcd38387bcef4b", "Add connections.max.idle.ms"),
			fixPR(librdkafkaRepo, "3289", "Change connections.max.idle.ms default on Azure to <4 minutes"),
			fixCommit(librdkafkaRepo, "ba7aaa7ce8e77b8568015cfad721a9658ea69fd7", "Change connections.max.idle.ms default on Azure to <4 minutes"),
		},
		Notes: "From 1.7.0 connections.max.idle.ms closes idle connections from the client side; it defaults to 0 (off) unless bootstrap.servers contains \"azure\" (then 230 s). On 1.7.0 and later, set it below the idle timeout of the broker and of anything between client and broker.",
	},
	{
		ID: "sarama-1162", Library: Sarama,
		Title: "A broker connection that failed with a transport error (EOF, ECONNRESET, EPIPE) stays open and in use",
		Affected: AffectedRange{
			Basis: "introduction not pinned: no release before the fix closes a connection on a transport error (issue #1162 was filed in 2018)"},
		Fixed: "v1.47.0", FixDate: date("2025-12-19T21:19:52+08:00"),
		Symptom:      SymptomHeldClose,
		SymptomWords: "held CLOSE sockets toward a broker that reset the connection (CLOSE_WAIT toward one that closed it), still held by the process while Sarama goes on sending to that broker and failing",
		Sources: []BugRef{
			issue(saramaRepo, "1162", "ClusterAdmin should reconnect broker after disconnected"),
			fixPR(saramaRepo, "3412", "fix(broker): auto-close broken connections (merged as 4637c7e0d15c)"),
			fixCommit(saramaRepo, "a10b087c6c6f70fa14069167cfc61ded316f57e4", "fix(broker): close connection on transport errors"),
		},
		Notes: "From v1.47.0 a Broker closes its connection on EOF, ErrUnexpectedEOF, ECONNRESET, ECONNABORTED, EPIPE, ENOTCONN and other non-timeout network errors in ApiVersions and sendAndReceive (shouldCloseBrokerConn), so that the next Open dials again.",
	},
	{
		ID: "sarama-2074", Library: Sarama,
		Title: "Client.RefreshBrokers drops the seed brokers without closing their connections",
		Affected: AffectedRange{From: "v1.27.1",
			Basis: "RefreshBrokers was added by PR #1781 (commit 654bd0169148) and first released in v1.27.1; it set the seed broker lists to nil without closing them"},
		Fixed: "v1.33.0", FixDate: date("2022-04-01T18:42:43+01:00"),
		Symptom:      SymptomSeedCloseWait,
		SymptomWords: "a connection per seed broker left behind at every RefreshBrokers call: ESTABLISHED toward the bootstrap addresses, CLOSE_WAIT once the broker's idle close comes (Sarama never reads them), growing with each refresh",
		Sources: []BugRef{
			issue(saramaRepo, "2074", "Seed Broker Connection Leak (reported against v1.29.1)"),
			fixPR(saramaRepo, "2203", "fix: prevent RefreshBrokers leaking old brokers (merged as a7dab62e38f8)"),
			fixCommit(saramaRepo, "132afa552e706dd7669670e47d4a916d76ec0e27", "fix: prevent RefreshBrokers leaking old brokers"),
		},
		Notes: "Only programs that call Client.RefreshBrokers (to follow changed bootstrap addresses, for example) are concerned.",
	},
	{
		ID: "sarama-2204", Library: Sarama,
		Title: "Client.RefreshController drops the previous controller's Broker without closing its connection",
		Affected: AffectedRange{From: "v1.26.0",
			Basis: "RefreshController is first in v1.26.0 (the first release whose client.go has it); its deregisterController deleted the controller without Close"},
		Fixed: "v1.33.0", FixDate: date("2022-04-01T19:09:58+01:00"),
		Symptom:      SymptomCloseWaitLeak,
		SymptomWords: "a connection toward the controller broker left behind at each RefreshController, which ClusterAdmin calls when a request fails with NOT_CONTROLLER: CLOSE_WAIT toward the brokers that grows and never drains",
		Sources: []BugRef{
			fixPR(saramaRepo, "2204", "fix: prevent RefreshController leaking controller (merged as 2c041922e9a3)"),
			fixCommit(saramaRepo, "9842341bd02c879dadfcd374b80c91cd1bf10b21", "fix: prevent RefreshController leaking controller"),
		},
		Notes: "v1.33.0 closes the controller's Broker before deregistering it.",
	},
	{
		ID: "sarama-3143", Library: Sarama,
		Title: "Sockets the kernel has ended after a network reset stay open: seed and registered brokers are never checked for a socket error",
		Affected: AffectedRange{
			Basis: "introduction not pinned: the reporter saw it on v1.45.1, and no release before the fix reads a broker socket's error"},
		Fixed: "v1.48.0", FixDate: date("2025-11-20T15:38:10+08:00"),
		Symptom:      SymptomHeldClose,
		SymptomWords: "held CLOSE sockets (TCP_CLOSE, owned by the process's fds, in no kernel table) toward seed or registered brokers after a network reset, there until the process restarts; the reporter found them with a kernel module, kdiag shows them as held CLOSE",
		Sources: []BugRef{
			issue(saramaRepo, "3143", "Client SeekBroker Connect Leak"),
			fixPR(saramaRepo, "3384", "fix: close broken tcp connections (rebase-merged with three follow-up commits)"),
			fixCommit(saramaRepo, "8eafc46589bdf53b897391c827e77e6ac6958790", "fix: close broken tcp connections"),
			fixCommit(saramaRepo, "e025a7344a07c9490667c5c4dc1b87911a050077", "the PR's last follow-up: remove return from checkSeedBrokersHealth"),
		},
		Notes: "From v1.48.0 every metadata update reads SO_ERROR of each broker's socket (Broker.getSockError, sockopt_posix.go) and closes the brokers whose socket has an error. On older versions, close and recreate the client after network errors.",
	},
}

// KnownBugs returns the whole catalog, sorted by library and number. The
// entries share their Sources: do not modify them.
func KnownBugs() []KnownBug { return slices.Clone(knownBugs) }

// LookupBug returns the entry with the given ID.
func LookupBug(id string) (KnownBug, bool) {
	for _, b := range knownBugs {
		if b.ID == id {
			return b, true
		}
	}
	return KnownBug{}, false
}

// BugsFor returns the known bugs of library (a catalog ID, Client.Library)
// that affect version (as Client.Version writes it: "v1.38.1" for a Go
// module, "2.3.0" for librdkafka, "2.0.2" for kafka-python, "2.2.4" for
// KafkaJS, "3.9.0" or "7.7.0-ccs" for kafka-clients), in catalog order. A
// version that cannot be placed against a bug's range (see Verdict) gets
// nothing for that bug: the catalog does not guess.
func BugsFor(library, version string) []KnownBug {
	var out []KnownBug
	for _, b := range knownBugs {
		if b.Library == library && b.Match(version) == VerdictAffected {
			out = append(out, b)
		}
	}
	return out
}

// bugNumber is the number in a bug's ID: 3143 for sarama-3143, 6101 for
// KAFKA-6101; -1 when there is none.
func bugNumber(id string) int {
	i := strings.LastIndexByte(id, '-')
	n, err := strconv.Atoi(id[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// compareBugs orders the catalog: by library, then by number.
func compareBugs(a, b KnownBug) int {
	return cmp.Or(cmp.Compare(a.Library, b.Library), cmp.Compare(bugNumber(a.ID), bugNumber(b.ID)))
}
