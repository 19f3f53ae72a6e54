package clients

import (
	"strconv"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// Verdict says how a client version stands against a known bug.
type Verdict int

const (
	// VerdictUnknown: the version cannot be placed against the bug's
	// range, and nothing should be said: it does not parse, it is a
	// pre-release of a bound, a Go pseudo-version of a commit that may
	// hold the fix, or a Confluent build outside the known mapping.
	VerdictUnknown Verdict = iota
	// VerdictNotAffected: the version is before the release that
	// introduced the bug, or at or after the one that fixed it.
	VerdictNotAffected
	// VerdictAffected: the version is in the affected range.
	VerdictAffected
)

// String writes affected, not affected or unknown.
func (v Verdict) String() string {
	switch v {
	case VerdictAffected:
		return "affected"
	case VerdictNotAffected:
		return "not affected"
	}
	return "unknown"
}

// versionScheme is how a library writes its versions, as Client.Version
// holds them (clients/identify.go).
type versionScheme int

const (
	// schemeGo: Go module versions from the build info, "v1.22.3",
	// pseudo-versions "v1.47.1-0.20260423114337-e025a7344a07" included.
	schemeGo versionScheme = iota + 1
	// schemeSemver: semantic versions without the v: npm's "2.2.4",
	// librdkafka's "2.0.2" and "1.0.0-RC9" (rdkafkaVersionString).
	schemeSemver
	// schemePython: PEP 440 versions from a dist-info or egg-info
	// directory name: "2.0.2", "1.4.0rc1", "2.0.2.post1".
	schemePython
	// schemeJava: the version of a kafka-clients jar, "3.9.0",
	// "0.11.0.2" (four parts before 1.0), Confluent's "7.7.0-ccs".
	schemeJava
)

// bugSchemes names the version scheme of each library the known-bug
// catalog can match.
var bugSchemes = map[string]versionScheme{
	Sarama:           schemeGo,
	FranzGo:          schemeGo,
	KafkaGo:          schemeGo,
	ConfluentKafkaGo: schemeGo,
	Librdkafka:       schemeSemver,
	KafkaJS:          schemeSemver,
	KafkaPython:      schemePython,
	AIOKafka:         schemePython,
	KafkaClients:     schemeJava,
}

// Match says whether version, as Client.Version writes it for the bug's
// library, is affected by the bug. A version that cannot be placed is
// VerdictUnknown: the catalog says nothing rather than guess.
func (b KnownBug) Match(version string) Verdict {
	version = strings.TrimSpace(version)
	if version == "" {
		return VerdictUnknown
	}
	switch bugSchemes[b.Library] {
	case schemeGo:
		return b.matchGo(version)
	case schemeSemver:
		return matchSemver("v"+version, semverBound(b.Affected.From), semverBound(b.Fixed))
	case schemePython:
		return b.matchParsed(version, parsePython)
	case schemeJava:
		return b.matchParsed(version, parseJava)
	}
	return VerdictUnknown
}

// semverBound writes a bound of the semver scheme as x/mod/semver reads
// it: with the v, "" kept "".
func semverBound(v string) string {
	if v == "" {
		return ""
	}
	return "v" + v
}

// relation is where a version stands against one bound of a range.
type relation int

const (
	relUnknown   relation = iota
	relBelow              // every release the version can stand for is before the bound
	relAtOrAbove          // every one is the bound or after it
)

// verdictOf combines where a version stands against the first affected
// release (relFrom; relAtOrAbove when the range has no lower bound) and
// against the fixed one.
func verdictOf(relFrom, relFixed relation) Verdict {
	switch {
	case relFixed == relAtOrAbove || relFrom == relBelow:
		return VerdictNotAffected
	case relFixed == relBelow && relFrom == relAtOrAbove:
		return VerdictAffected
	}
	return VerdictUnknown
}

// matchSemver places a semantic version (with its v) with x/mod/semver. A
// release compares as it is; a pre-release (v1.0.0-RC9) stands for some
// build before its release and after the releases before it, so against
// its own release as a bound it is unknown: an RC of the fixed release may
// or may not hold the fix.
func matchSemver(v, from, fixed string) Verdict {
	if !semver.IsValid(v) {
		return VerdictUnknown
	}
	canon := semver.Canonical(v)
	pre := semver.Prerelease(canon)
	core := strings.TrimSuffix(canon, pre)
	rel := func(bound string) relation {
		if bound == "" {
			return relAtOrAbove
		}
		c := semver.Compare(core, bound)
		switch {
		case c < 0:
			return relBelow
		case c > 0 || pre == "":
			return relAtOrAbove
		}
		return relUnknown
	}
	return verdictOf(rel(from), rel(fixed))
}

// matchGo places a Go module version. Releases and pre-releases compare
// as semantic versions. A pseudo-version names a commit after its base
// release: one based on the fixed release or later holds the fix; one
// based on an affected release and made before the fix was written
// (FixDate, the fixing commit's author date) cannot hold it; any other
// may, and is unknown.
func (b KnownBug) matchGo(v string) Verdict {
	if !semver.IsValid(v) {
		return VerdictUnknown // "(devel)", a local replace's "", ...
	}
	if !module.IsPseudoVersion(v) {
		return matchSemver(v, b.Affected.From, b.Fixed)
	}
	base, err := module.PseudoVersionBase(v)
	if err != nil {
		return VerdictUnknown
	}
	made, err := module.PseudoVersionTime(v)
	if err != nil {
		return VerdictUnknown
	}
	if base != "" && semver.Compare(base, b.Fixed) >= 0 {
		return VerdictNotAffected
	}
	if b.Affected.From != "" && (base == "" || semver.Compare(base, b.Affected.From) < 0) {
		return VerdictUnknown // it may or may not hold what introduced the bug
	}
	if !b.FixDate.IsZero() && made.Before(b.FixDate) {
		return VerdictAffected
	}
	return VerdictUnknown
}

// placed is a version read by parsePython or parseJava: its numeric
// release parts and what they stand for.
type placed struct {
	nums []int
	kind placedKind
}

type placedKind int

const (
	placedRelease placedKind = iota // exactly that release
	placedPre                       // a pre-release or development build of it
	placedSeries                    // any release that starts with nums (a Confluent x.y.z-ccs)
)

// matchParsed places version, read by parse, against the bug's bounds,
// which parse must read as releases.
func (b KnownBug) matchParsed(version string, parse func(string) (placed, bool)) Verdict {
	v, ok := parse(version)
	if !ok {
		return VerdictUnknown
	}
	fixed, ok := parse(b.Fixed)
	if !ok || fixed.kind != placedRelease {
		return VerdictUnknown
	}
	relFrom := relAtOrAbove
	if b.Affected.From != "" {
		from, ok := parse(b.Affected.From)
		if !ok || from.kind != placedRelease {
			return VerdictUnknown
		}
		relFrom = v.against(from.nums)
	}
	return verdictOf(relFrom, v.against(fixed.nums))
}

// against says where v stands against the release bound.
func (v placed) against(bound []int) relation {
	switch v.kind {
	case placedSeries:
		// Every release of the series is below the bound when the series
		// is below the bound's own prefix, and at or above it when it is
		// above, or equal with the rest of the bound zeros (x.y.0).
		n := len(v.nums)
		prefix := bound
		if len(prefix) > n {
			prefix = prefix[:n]
		}
		switch c := compareNums(v.nums, prefix); {
		case c < 0:
			return relBelow
		case c > 0:
			return relAtOrAbove
		}
		if len(bound) <= n || allZero(bound[n:]) {
			return relAtOrAbove
		}
		return relUnknown
	case placedPre:
		switch c := compareNums(v.nums, bound); {
		case c < 0:
			return relBelow
		case c > 0:
			return relAtOrAbove
		}
		return relUnknown
	}
	if compareNums(v.nums, bound) < 0 {
		return relBelow
	}
	return relAtOrAbove
}

// compareNums compares release parts numerically, the shorter padded
// with zeros (1.0 is 1.0.0).
func compareNums(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func allZero(n []int) bool {
	for _, x := range n {
		if x != 0 {
			return false
		}
	}
	return true
}

// parseNums reads dot-separated decimal parts, between min and max of
// them.
func parseNums(s string, minParts, maxParts int) ([]int, bool) {
	parts := strings.Split(s, ".")
	if len(parts) < minParts || len(parts) > maxParts {
		return nil, false
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" || len(p) > 9 {
			return nil, false
		}
		nums[i], _ = strconv.Atoi(p)
	}
	return nums, true
}

// parsePython reads the part of PEP 440 that Python packages put in their
// metadata directory names: a release (1 to 4 parts), then at most one of
// a pre-release (a1, b2, rc1, also written .rc1 or -rc1), a post-release
// (.post1: the same code as its release, repackaged) and a development
// release (.dev0: before its release). Epochs (1!2.0) and local versions
// (+ubuntu1) are not read: unknown. Written by hand: x/mod/semver and the
// version libraries at hand (hashicorp/go-version) read "2.0.2.post1"
// as not a version or as a pre-release, the opposite of what it is.
func parsePython(s string) (placed, bool) {
	s = strings.ToLower(s)
	end := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end < 0 {
		end = len(s)
	}
	rel, rest := s[:end], s[end:]
	if rest != "" {
		// The separator before a suffix belongs to it: 2.0.2.post1, 1.4.0-rc1.
		rel = strings.TrimSuffix(rel, ".")
		rest = strings.TrimLeft(rest, "-_")
	}
	nums, ok := parseNums(rel, 1, 4)
	if !ok {
		return placed{}, false
	}
	if rest == "" {
		return placed{nums: nums}, true
	}
	for _, w := range []struct {
		word string
		kind placedKind
	}{{"post", placedRelease}, {"dev", placedPre}, {"rc", placedPre}, {"a", placedPre}, {"b", placedPre}} {
		if isWordNumber(rest, w.word) {
			return placed{nums: nums, kind: w.kind}, true
		}
	}
	return placed{}, false
}

// confluentToApache maps a Confluent Platform major.minor, which names its
// kafka-clients builds (kafka-clients-7.7.0-ccs.jar), to the Apache Kafka
// release series it is built from. Source: Confluent's "Supported Versions
// and Interoperability" table (docs.confluent.io, legacy/platform/5.5.15:
// 3.0.x is 0.10.0.x ... 5.5.x is 2.5.x) and its Streams upgrade guide
// (platform/6.0: 6.0.x is 2.6.x ... 7.7.x is 3.7.x). Patch numbers are
// Confluent's own, so a -ccs build stands for the whole series. Later
// Confluent releases were not read at a source: unknown.
var confluentToApache = map[[2]int][]int{
	{3, 0}: {0, 10, 0}, {3, 1}: {0, 10, 1}, {3, 2}: {0, 10, 2}, {3, 3}: {0, 11, 0},
	{4, 0}: {1, 0}, {4, 1}: {1, 1},
	{5, 0}: {2, 0}, {5, 1}: {2, 1}, {5, 2}: {2, 2}, {5, 3}: {2, 3}, {5, 4}: {2, 4}, {5, 5}: {2, 5},
	{6, 0}: {2, 6}, {6, 1}: {2, 7}, {6, 2}: {2, 8},
	{7, 0}: {3, 0}, {7, 1}: {3, 1}, {7, 2}: {3, 2}, {7, 3}: {3, 3}, {7, 4}: {3, 4},
	{7, 5}: {3, 5}, {7, 6}: {3, 6}, {7, 7}: {3, 7},
}

// parseJava reads a kafka-clients version: 2 to 4 numeric parts (Apache
// Kafka wrote four before 1.0: 0.11.0.2), optionally followed by -ccs (a
// Confluent Platform build, numbered by Confluent: mapped to its Apache
// series) or a pre-release word (-rc1, -SNAPSHOT). Written by hand: the
// four-part releases and -ccs, a build suffix that is not a pre-release,
// are outside semantic versioning.
func parseJava(s string) (placed, bool) {
	core, suffix, hasSuffix := strings.Cut(s, "-")
	nums, ok := parseNums(core, 2, 4)
	if !ok {
		return placed{}, false
	}
	if !hasSuffix {
		return placed{nums: nums}, true
	}
	switch w := strings.ToLower(suffix); {
	case w == "ccs":
		series, ok := confluentToApache[[2]int{nums[0], nums[1]}]
		if !ok {
			return placed{}, false
		}
		return placed{nums: series, kind: placedSeries}, true
	case w == "snapshot", isWordNumber(w, "rc"), isWordNumber(w, "alpha"), isWordNumber(w, "beta"):
		return placed{nums: nums, kind: placedPre}, true
	}
	return placed{}, false
}

// isWordNumber matches word followed by an optional decimal number: rc,
// rc1, rc12.
func isWordNumber(s, word string) bool {
	n, ok := strings.CutPrefix(s, word)
	return ok && strings.Trim(n, "0123456789") == ""
}
