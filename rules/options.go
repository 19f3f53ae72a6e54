package rules

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// DefaultKafkaVersion is the Java client version checked when none is given:
// 4.1, the newest release whose configs the catalog describes (its "4.x"
// column is trunk, which 4.1 matches for every key kdiag checks).
const DefaultKafkaVersion = "4.1"

// DefaultBrokerIdleMS is the broker's connections.max.idle.ms default (10
// minutes, SocketServerConfigs.CONNECTIONS_MAX_IDLE_MS_DEFAULT).
const DefaultBrokerIdleMS = 600000

// DefaultOptions returns the options kdiag lint uses without flags: Kafka 4.1
// and a broker that closes connections idle for 600000 ms.
func DefaultOptions() Options {
	return Options{KafkaVersion: DefaultKafkaVersion, BrokerIdleMS: DefaultBrokerIdleMS}
}

// KnownVersions are the Java client releases whose configs the catalog
// describes: 2.0 to 2.8 (upstream/java-producer-2.*.tsv, from each
// release's source), 3.9 and 4.x (default_3.9 and default_4.x_trunk of
// java-producer-configs.tsv, with 4.0 and 4.1 told apart by their "new in"
// statuses): --kafka-version takes these, with a patch number or not.
var KnownVersions = append(append([]string(nil), java2Versions...), "3.9", "4.0", "4.1")

// knownVersionsText lists KnownVersions for messages, 2.x as a range.
func knownVersionsText() string {
	return fmt.Sprintf("%s to %s, 3.9, 4.0 and 4.1", java2Versions[0], java2Versions[len(java2Versions)-1])
}

// Version is a Kafka release, major.minor.
type Version struct{ Major, Minor int }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseVersion reads a --kafka-version value: "2.1" (2.0 to 2.8), "3.9",
// "4.0", "4.1", "4.x" (the newest 4 release kdiag knows, 4.1), "4" (4.0), or
// a patch release such as "2.1.1" or "3.9.1". Other releases (1.x, 3.0 to
// 3.8, 4.2 and after) are refused with the list of KnownVersions: their
// defaults and checks are not in the catalog, and a silent fallback would
// check the wrong client.
func ParseVersion(s string) (Version, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if s == "" {
		s = DefaultKafkaVersion
	}
	parts := strings.Split(s, ".")
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return Version{}, fmt.Errorf("kafka version %q: want major.minor such as 3.9 or 4.1", s)
	}
	minor := 0
	if len(parts) > 1 {
		if parts[1] == "x" {
			if major == 4 {
				return ParseVersion(DefaultKafkaVersion)
			}
			return Version{}, fmt.Errorf("kafka version %q: only 4.x may use x", s)
		}
		minor, err = strconv.Atoi(parts[1])
		if err != nil {
			return Version{}, fmt.Errorf("kafka version %q: want major.minor such as 3.9 or 4.1", s)
		}
	}
	v := Version{major, minor}
	for _, k := range KnownVersions {
		if k == v.String() {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("kafka version %q: kdiag's catalog describes the Java client %s (4.x is %s); other versions have other defaults and checks: give the nearest of these",
		s, knownVersionsText(), DefaultKafkaVersion)
}

// parseMajorMinor reads "major.minor" with no check against KnownVersions.
func parseMajorMinor(s string) (Version, error) {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("kafka version %q: want major.minor", s)
	}
	return Version{a, b}, nil
}

// Validate checks the options a command was given.
func (o Options) Validate() error {
	if _, err := ParseVersion(o.KafkaVersion); err != nil {
		return err
	}
	return nil
}

// ErrNoBrokerIdle is returned by BrokerIdleFromFile for a file that cannot be
// read as broker properties.
var ErrNoBrokerIdle = errors.New("broker connections.max.idle.ms")

// BrokerIdleFromFile reads connections.max.idle.ms from a broker's
// server.properties. set says the file sets it; when it does not, the
// broker default (600000) applies and is returned, and the caller should
// say so: a broker file that does not set the key is often not the file
// the broker really runs with.
func BrokerIdleFromFile(name string, r io.Reader) (ms int64, set bool, err error) {
	f, err := config.ParseProperties(name, r)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", name, err)
	}
	var e config.Entry
	for _, x := range f.Entries {
		if x.Key == "connections.max.idle.ms" {
			e, set = x, true // the last one wins, as in java.util.Properties
		}
	}
	if !set {
		return DefaultBrokerIdleMS, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(e.Value), 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%s:%d: connections.max.idle.ms: %q is not a number of milliseconds: %w",
			name, e.ValuePos.Line, e.Value, ErrNoBrokerIdle)
	}
	return n, true, nil
}
