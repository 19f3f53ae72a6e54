package clients

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// mapsInfo is what identification reads of /proc/<pid>/maps: the mapped
// files that name a Kafka client or its binding.
type mapsInfo struct {
	// librdkafka is the path of the mapped librdkafka (librdkafka.so.1,
	// or a wheel's confluent_kafka.libs/librdkafka-<hash>.so.1).
	librdkafka string
	// confluentPython is confluent-kafka-python's extension module
	// (.../confluent_kafka/cimpl.cpython-311-x86_64-linux-gnu.so).
	confluentPython string
	// nodeRdkafka is node-rdkafka's addon (.../node-librdkafka.node).
	nodeRdkafka string
}

// parseMaps reads maps lines ("address perms offset dev inode pathname",
// proc(5)); the pathname is the sixth field and may hold spaces. It stops
// at a line that is not maps syntax, with an error quoting it.
func parseMaps(r io.Reader) (mapsInfo, error) {
	var m mapsInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		name, ok := mapsPath(line)
		if !ok {
			return m, fmt.Errorf("maps line %d: %q: want address perms offset dev inode [path]", n, line)
		}
		if !strings.HasPrefix(name, "/") {
			continue // [heap], [stack], anonymous
		}
		name = strings.TrimSuffix(name, " (deleted)")
		base := path.Base(name)
		switch {
		case m.librdkafka == "" && strings.HasPrefix(base, "librdkafka") && strings.Contains(base, ".so"):
			m.librdkafka = name
		case m.confluentPython == "" && strings.HasPrefix(base, "cimpl.") && path.Base(path.Dir(name)) == "confluent_kafka":
			m.confluentPython = name
		case m.nodeRdkafka == "" && base == "node-librdkafka.node":
			m.nodeRdkafka = name
		}
	}
	return m, sc.Err()
}

// mapsPath returns the pathname field of a maps line ("" for an anonymous
// mapping) and false when the line has fewer than five fields.
func mapsPath(line string) (string, bool) {
	rest := line
	for range 5 {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return "", false
		}
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		rest = rest[i:]
	}
	return strings.TrimLeft(rest, " "), true
}
