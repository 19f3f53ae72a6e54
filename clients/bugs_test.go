package clients

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bugRepos is the repository each library's sources live in.
var bugRepos = map[string]string{
	Sarama:       saramaRepo,
	KafkaGo:      kafkaGoRepo,
	FranzGo:      franzRepo,
	Librdkafka:   librdkafkaRepo,
	KafkaPython:  kafkaPythonRepo,
	KafkaClients: apacheKafkaRepo,
}

var fullHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// TestKnownBugCatalog walks every entry: an ID of its pattern, unique and
// in order; a library kdiag identifies; an affected range whose bounds
// place as they say (the first affected release affected, the fixed one
// not); a symptom of the set; and the sources: an issue, pull request or
// JIRA entry carrying the ID's number, and the full hash of a fixing
// commit, each with a link.
func TestKnownBugCatalog(t *testing.T) {
	bugs := KnownBugs()
	if len(bugs) == 0 {
		t.Fatal("the catalog is empty")
	}
	if !slices.IsSortedFunc(bugs, compareBugs) {
		t.Error("the catalog is not sorted by library and number")
	}
	seen := map[string]bool{}
	used := map[Symptom]bool{}
	for _, b := range bugs {
		t.Run(b.ID, func(t *testing.T) {
			if seen[b.ID] {
				t.Errorf("duplicate ID")
			}
			seen[b.ID] = true
			pattern := b.Library + "-"
			if b.Library == KafkaClients {
				pattern = "KAFKA-"
			}
			n, err := strconv.Atoi(strings.TrimPrefix(b.ID, pattern))
			if !strings.HasPrefix(b.ID, pattern) || err != nil || n <= 0 {
				t.Errorf("ID %q is not %s<number>", b.ID, pattern)
			}
			if _, ok := Lookup(b.Library); !ok {
				t.Errorf("library %q is not in the client catalog", b.Library)
			}
			if _, ok := bugSchemes[b.Library]; !ok {
				t.Errorf("library %q has no version scheme", b.Library)
			}
			for what, s := range map[string]string{"title": b.Title, "affected basis": b.Affected.Basis, "symptom words": b.SymptomWords, "notes": b.Notes} {
				if strings.TrimSpace(s) == "" {
					t.Errorf("no %s", what)
				}
			}
			if b.Fixed == "" {
				t.Fatal("no fixed version")
			}
			if got := b.Match(b.Fixed); got != VerdictNotAffected {
				t.Errorf("the fixed release %s places as %v, want not affected", b.Fixed, got)
			}
			if b.Affected.From != "" {
				if got := b.Match(b.Affected.From); got != VerdictAffected {
					t.Errorf("the first affected release %s places as %v, want affected", b.Affected.From, got)
				}
			}
			if b.FixDate.IsZero() {
				t.Error("no fix date (or it does not parse)")
			}
			if b.Symptom.Describe() == "" {
				t.Errorf("symptom %q is not of the set", b.Symptom)
			}
			used[b.Symptom] = true
			checkBugSources(t, b, n)
		})
	}
	for _, s := range Symptoms() {
		if !used[s] {
			t.Errorf("symptom %s is used by no entry: keep the set to what the entries need", s)
		}
	}
}

func checkBugSources(t *testing.T, b KnownBug, number int) {
	t.Helper()
	var report, numbered bool
	for _, r := range b.Sources {
		if r.URL() == "" || r.Says == "" {
			t.Errorf("source %+v: no link or no words", r)
		}
		if r.Kind != RefJira && r.Repo != bugRepos[b.Library] {
			t.Errorf("source %s: not in %s", r, bugRepos[b.Library])
		}
		switch r.Kind {
		case RefIssue, RefPR, RefJira:
			report = true
			if strings.TrimPrefix(r.ID, "KAFKA-") == strconv.Itoa(number) {
				numbered = true
			}
		case RefCommit:
			if !fullHash.MatchString(r.ID) {
				t.Errorf("commit %q is not a full hash", r.ID)
			}
		default:
			t.Errorf("source %+v: unknown kind", r)
		}
	}
	if !report {
		t.Error("no issue, pull request or JIRA source")
	}
	if !numbered {
		t.Errorf("no issue, pull request or JIRA source numbered %d, as the ID says", number)
	}
	if c, ok := b.FixCommit(); !ok || !fullHash.MatchString(c.ID) {
		t.Error("no fixing commit")
	}
}

func bugIDs(bugs []KnownBug) []string {
	var ids []string
	for _, b := range bugs {
		ids = append(ids, b.ID)
	}
	return ids
}

// TestBugsFor places real versions, as Client.Version writes them, before,
// at and after each fix, and versions that say nothing.
func TestBugsFor(t *testing.T) {
	tests := []struct {
		library, version string
		want             []string
	}{
		// Sarama: the issue's v1.29.1 (IBM/sarama#2074 filed against it).
		{Sarama, "v1.25.0", []string{"sarama-1162", "sarama-3143"}},
		{Sarama, "v1.26.0", []string{"sarama-1162", "sarama-2204", "sarama-3143"}},
		{Sarama, "v1.27.0", []string{"sarama-1162", "sarama-2204", "sarama-3143"}},
		{Sarama, "v1.27.1", []string{"sarama-1162", "sarama-2074", "sarama-2204", "sarama-3143"}},
		{Sarama, "v1.29.1", []string{"sarama-1162", "sarama-2074", "sarama-2204", "sarama-3143"}},
		{Sarama, "v1.32.0", []string{"sarama-1162", "sarama-2074", "sarama-2204", "sarama-3143"}},
		{Sarama, "v1.33.0", []string{"sarama-1162", "sarama-3143"}},
		{Sarama, "v1.38.1", []string{"sarama-1162", "sarama-3143"}},
		{Sarama, "v1.45.1", []string{"sarama-1162", "sarama-3143"}},
		{Sarama, "v1.47.0", []string{"sarama-3143"}},
		{Sarama, "v1.48.0", nil},
		{Sarama, "v1.61.1", nil},
		{Sarama, "v1.29.1+incompatible", []string{"sarama-1162", "sarama-2074", "sarama-2204", "sarama-3143"}},
		// A pre-release of the fixed release may or may not hold the fix.
		{Sarama, "v1.48.0-rc.1", nil},
		{Sarama, "v1.47.0-rc.1", []string{"sarama-3143"}},
		// Pseudo-versions: made before the fix was written, after, or
		// based on the fixed release.
		{Sarama, "v1.45.2-0.20250601000000-0123456789ab", []string{"sarama-1162", "sarama-3143"}},
		{Sarama, "v1.47.1-0.20260423114337-e025a7344a07", nil},
		{Sarama, "v1.48.1-0.20260501000000-0123456789ab", nil},
		{Sarama, "v1.29.2-0.20210601000000-abcdefabcdef", []string{"sarama-1162", "sarama-2074", "sarama-2204", "sarama-3143"}},
		{Sarama, "(devel)", nil},

		{FranzGo, "v0.6.10", nil},
		{FranzGo, "v0.6.11", []string{"franz-go-1231"}},
		{FranzGo, "v1.19.3", []string{"franz-go-1231"}},
		{FranzGo, "v1.19.4", []string{"franz-go-1231", "franz-go-1348"}},
		{FranzGo, "v1.20.6", []string{"franz-go-1231", "franz-go-1348"}},
		{FranzGo, "v1.20.7", []string{"franz-go-1348"}},
		{FranzGo, "v1.21.3", []string{"franz-go-1348"}},
		{FranzGo, "v1.21.4", nil},
		{FranzGo, "v1.22.3", nil},

		{KafkaGo, "v0.2.5", []string{"kafka-go-258"}},
		{KafkaGo, "v0.3.5", []string{"kafka-go-258"}},
		{KafkaGo, "v0.3.6", nil},
		{KafkaGo, "v0.4.51", nil},

		// librdkafka as rd_kafka_version_str writes it.
		{Librdkafka, "0.11.6", []string{"librdkafka-1561", "librdkafka-3109"}},
		{Librdkafka, "0.11.6-RC5", []string{"librdkafka-1561", "librdkafka-3109"}},
		{Librdkafka, "1.0.0-RC9", []string{"librdkafka-3109"}},
		{Librdkafka, "1.0.0-pre5", []string{"librdkafka-3109"}},
		{Librdkafka, "1.0.0", []string{"librdkafka-3109"}},
		{Librdkafka, "1.6.2", []string{"librdkafka-3109"}},
		{Librdkafka, "1.7.0-RC1", nil},
		{Librdkafka, "1.7.0", nil},
		{Librdkafka, "2.0.2", nil},
		{Librdkafka, "2.3.0", nil},

		// kafka-python: the issue's 1.1.1 (dpkp/kafka-python#689).
		{KafkaPython, "0.9.5", nil},
		{KafkaPython, "1.0.0", []string{"kafka-python-552", "kafka-python-613", "kafka-python-689"}},
		{KafkaPython, "1.0.1", []string{"kafka-python-613", "kafka-python-689"}},
		{KafkaPython, "1.1.1", []string{"kafka-python-689", "kafka-python-729"}},
		{KafkaPython, "1.2.0", []string{"kafka-python-729"}},
		{KafkaPython, "1.2.1rc1", []string{"kafka-python-729"}},
		{KafkaPython, "1.2.2", nil},
		{KafkaPython, "1.4.0rc1", nil},
		{KafkaPython, "1.4.0", []string{"kafka-python-1425"}},
		{KafkaPython, "1.4.1", []string{"kafka-python-1425"}},
		{KafkaPython, "1.4.1.post1", []string{"kafka-python-1425"}},
		{KafkaPython, "1.4.2.dev0", nil},
		{KafkaPython, "1.4.2", nil},
		{KafkaPython, "2.0.2", nil},

		{KafkaClients, "0.10.2.1", nil},
		{KafkaClients, "0.11.0.0", []string{"KAFKA-6101"}},
		{KafkaClients, "0.11.0.2", []string{"KAFKA-6101"}},
		{KafkaClients, "0.11.0.3-rc0", []string{"KAFKA-6101"}},
		{KafkaClients, "1.0.0-rc3", nil},
		{KafkaClients, "1.0.0", nil},
		{KafkaClients, "2.1.1", nil},
		{KafkaClients, "3.9.0", nil},
		// Confluent builds: 3.3.x is Apache 0.11.0.x, 3.2.x 0.10.2.x, 4.0.x
		// 1.0.x; 7.9 is past the mapping read at its source.
		{KafkaClients, "3.3.2-ccs", []string{"KAFKA-6101"}},
		{KafkaClients, "3.2.0-ccs", nil},
		{KafkaClients, "4.0.0-ccs", nil},
		{KafkaClients, "7.7.0-ccs", nil},
		{KafkaClients, "7.9.0-ccs", nil},

		{KafkaJS, "2.2.4", nil},
		{"no-such-library", "1.0.0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.library+"@"+tt.version, func(t *testing.T) {
			if d := cmp.Diff(tt.want, bugIDs(BugsFor(tt.library, tt.version))); d != "" {
				t.Errorf("BugsFor(%q, %q) (-want +got):\n%s", tt.library, tt.version, d)
			}
		})
	}
}

// TestBugVerdicts tells unknown apart from not affected: what cannot be
// placed says nothing, in either direction.
func TestBugVerdicts(t *testing.T) {
	bug := func(id string) KnownBug {
		b, ok := LookupBug(id)
		if !ok {
			t.Fatalf("no entry %s", id)
		}
		return b
	}
	// Bounds with a patch number, against a Confluent series that cannot
	// tell patches apart.
	patchFix := KnownBug{ID: "kafka-clients-test", Library: KafkaClients, Affected: AffectedRange{From: "2.8.1"}, Fixed: "3.7.1"}
	tests := []struct {
		name    string
		bug     KnownBug
		version string
		want    Verdict
	}{
		{"empty", bug("sarama-3143"), "", VerdictUnknown},
		{"devel", bug("sarama-3143"), "(devel)", VerdictUnknown},
		{"not semver", bug("sarama-3143"), "1.38.1", VerdictUnknown},
		{"go release", bug("sarama-3143"), "v1.38.1", VerdictAffected},
		{"go fixed", bug("sarama-3143"), "v1.48.0", VerdictNotAffected},
		{"go pre-release of the fix", bug("sarama-3143"), "v1.48.0-rc.1", VerdictUnknown},
		{"pseudo before the fix was written", bug("sarama-3143"), "v1.45.2-0.20250601000000-0123456789ab", VerdictAffected},
		{"pseudo after the fix was written", bug("sarama-3143"), "v1.47.1-0.20260423114337-e025a7344a07", VerdictUnknown},
		{"pseudo on the fixed release", bug("sarama-3143"), "v1.48.1-0.20260501000000-0123456789ab", VerdictNotAffected},
		{"pseudo without base, no lower bound", bug("sarama-3143"), "v0.0.0-20200101000000-0123456789ab", VerdictAffected},
		{"pseudo without base, below the lower bound", bug("sarama-2074"), "v0.0.0-20200101000000-0123456789ab", VerdictUnknown},
		{"pseudo based below the first affected", bug("sarama-2074"), "v1.27.1-0.20200801000000-0123456789ab", VerdictUnknown},
		{"go before the first affected", bug("sarama-2074"), "v1.27.0", VerdictNotAffected},
		{"librdkafka RC of the fix", bug("librdkafka-1561"), "1.0.0-RC9", VerdictUnknown},
		{"librdkafka pre of the fix", bug("librdkafka-1561"), "1.0.0-pre5", VerdictUnknown},
		{"librdkafka RC before", bug("librdkafka-1561"), "0.11.6-RC5", VerdictAffected},
		{"librdkafka garbage", bug("librdkafka-1561"), "unknown", VerdictUnknown},
		{"python rc of the first affected", bug("kafka-python-1425"), "1.4.0rc1", VerdictUnknown},
		{"python dev of the fix", bug("kafka-python-1425"), "1.4.2.dev0", VerdictUnknown},
		{"python post", bug("kafka-python-1425"), "1.4.1.post1", VerdictAffected},
		{"python epoch", bug("kafka-python-1425"), "1!1.4.1", VerdictUnknown},
		{"python local", bug("kafka-python-1425"), "1.4.1+ubuntu1", VerdictUnknown},
		{"python before", bug("kafka-python-1425"), "1.3.5", VerdictNotAffected},
		{"java four parts", bug("KAFKA-6101"), "0.11.0.2", VerdictAffected},
		{"java rc of the fix", bug("KAFKA-6101"), "1.0.0-rc3", VerdictUnknown},
		{"java snapshot", bug("KAFKA-6101"), "0.11.0.3-SNAPSHOT", VerdictAffected},
		{"java unknown suffix", bug("KAFKA-6101"), "0.11.0.2-foo", VerdictUnknown},
		{"confluent in range", bug("KAFKA-6101"), "3.3.0-ccs", VerdictAffected},
		{"confluent below", bug("KAFKA-6101"), "3.2.3-ccs", VerdictNotAffected},
		{"confluent fixed", bug("KAFKA-6101"), "4.0.1-ccs", VerdictNotAffected},
		{"confluent unmapped", bug("KAFKA-6101"), "7.9.0-ccs", VerdictUnknown},
		{"confluent series of a patch fix", patchFix, "7.7.2-ccs", VerdictUnknown},
		{"confluent series before a patch fix", patchFix, "7.6.0-ccs", VerdictAffected},
		{"confluent series of a patch first-affected", patchFix, "6.2.0-ccs", VerdictUnknown},
		{"confluent series before a patch first-affected", patchFix, "6.1.0-ccs", VerdictNotAffected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.bug.Match(tt.version); got != tt.want {
				t.Errorf("%s.Match(%q) = %v, want %v", tt.bug.ID, tt.version, got, tt.want)
			}
		})
	}
}

func TestParsePython(t *testing.T) {
	tests := []struct {
		in   string
		want placed
		ok   bool
	}{
		{"2.0.2", placed{nums: []int{2, 0, 2}}, true},
		{"1.4", placed{nums: []int{1, 4}}, true},
		{"1.4.0rc1", placed{nums: []int{1, 4, 0}, kind: placedPre}, true},
		{"1.4.0.rc1", placed{nums: []int{1, 4, 0}, kind: placedPre}, true},
		{"1.4.0-RC1", placed{nums: []int{1, 4, 0}, kind: placedPre}, true},
		{"2.0.0a1", placed{nums: []int{2, 0, 0}, kind: placedPre}, true},
		{"2.0.0b2", placed{nums: []int{2, 0, 0}, kind: placedPre}, true},
		{"2.0.3.dev0", placed{nums: []int{2, 0, 3}, kind: placedPre}, true},
		{"2.0.2.post1", placed{nums: []int{2, 0, 2}}, true},
		{"1.0.0.1", placed{nums: []int{1, 0, 0, 1}}, true},
		{"", placed{}, false},
		{"2.0.2.", placed{}, false},
		{"2..2", placed{}, false},
		{"1!2.0", placed{}, false},
		{"2.0.2+local", placed{}, false},
		{"2.0.2.post1.dev0", placed{}, false},
		{"2.0.2rc", placed{nums: []int{2, 0, 2}, kind: placedPre}, true},
		{"v2.0.2", placed{}, false},
		{"1.2.3.4.5", placed{}, false},
	}
	for _, tt := range tests {
		got, ok := parsePython(tt.in)
		if ok != tt.ok || (ok && !cmp.Equal(tt.want, got, cmp.AllowUnexported(placed{}))) {
			t.Errorf("parsePython(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseJava(t *testing.T) {
	tests := []struct {
		in   string
		want placed
		ok   bool
	}{
		{"3.9.0", placed{nums: []int{3, 9, 0}}, true},
		{"0.11.0.2", placed{nums: []int{0, 11, 0, 2}}, true},
		{"7.7.0-ccs", placed{nums: []int{3, 7}, kind: placedSeries}, true},
		{"3.3.1-ccs", placed{nums: []int{0, 11, 0}, kind: placedSeries}, true},
		{"3.9.0-SNAPSHOT", placed{nums: []int{3, 9, 0}, kind: placedPre}, true},
		{"3.9.0-rc3", placed{nums: []int{3, 9, 0}, kind: placedPre}, true},
		{"8.0.0-ccs", placed{}, false},
		{"7.7.0-ce", placed{}, false},
		{"3", placed{}, false},
		{"3.9.0.1.2", placed{}, false},
		{"3.9.x", placed{}, false},
		{"", placed{}, false},
	}
	for _, tt := range tests {
		got, ok := parseJava(tt.in)
		if ok != tt.ok || (ok && !cmp.Equal(tt.want, got, cmp.AllowUnexported(placed{}))) {
			t.Errorf("parseJava(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBugRefAndRange(t *testing.T) {
	b, _ := LookupBug("sarama-2074")
	if got, want := b.Range(), ">= v1.27.1, < v1.33.0"; got != want {
		t.Errorf("Range() = %q, want %q", got, want)
	}
	b, _ = LookupBug("sarama-3143")
	if got, want := b.Range(), "< v1.48.0"; got != want {
		t.Errorf("Range() = %q, want %q", got, want)
	}
	c, _ := b.FixCommit()
	if got, want := c.String(), "IBM/sarama@8eafc46589bd"; got != want {
		t.Errorf("fix commit = %q, want %q", got, want)
	}
	if got, want := c.URL(), "https://github.com/IBM/sarama/commit/8eafc46589bdf53b897391c827e77e6ac6958790"; got != want {
		t.Errorf("fix commit URL = %q, want %q", got, want)
	}
	j := BugRef{Kind: RefJira, ID: "KAFKA-6101"}
	if j.String() != "KAFKA-6101" || j.URL() != "https://issues.apache.org/jira/browse/KAFKA-6101" {
		t.Errorf("JIRA ref writes %q, %q", j.String(), j.URL())
	}
}

// TestKnownBugDocsUpToDate fails when docs/known-bugs.md is not what the
// catalog writes.
func TestKnownBugDocsUpToDate(t *testing.T) {
	var buf bytes.Buffer
	if err := BugsMarkdown(&buf, KnownBugs()); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("..", BugDocsPath))
	if err != nil {
		t.Fatalf("%v: run go generate ./clients/", err)
	}
	if d := cmp.Diff(string(committed), buf.String()); d != "" {
		t.Errorf("%s is stale: run go generate ./clients/ and commit it (-committed +generated):\n%s", BugDocsPath, d)
	}
	for _, b := range KnownBugs() {
		if !strings.Contains(buf.String(), "## "+b.ID+": ") {
			t.Errorf("no section for %s", b.ID)
		}
	}
}

// FuzzBugMatch feeds any version string, as a process's files could hold,
// to every library's matching: it never panics, and BugsFor returns
// exactly the entries Match calls affected.
func FuzzBugMatch(f *testing.F) {
	for _, s := range []string{"v1.38.1", "v1.47.1-0.20260423114337-e025a7344a07", "(devel)", "1.0.0-RC9", "1.4.0rc1", "2.0.2.post1", "0.11.0.2", "7.7.0-ccs", "3.9.0-SNAPSHOT", "", "v", "1..0", "9999999999.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, version string) {
		for lib := range bugSchemes {
			var want []string
			for _, b := range knownBugs {
				if b.Library == lib && b.Match(version) == VerdictAffected {
					want = append(want, b.ID)
				}
			}
			if got := bugIDs(BugsFor(lib, version)); !slices.Equal(got, want) {
				t.Errorf("BugsFor(%q, %q) = %v, Match says %v", lib, version, got, want)
			}
		}
	})
}
