package producer

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// LoadConfig reads a Java .properties file through the config package's
// parser, the one kdiag lint uses, so that a key means the same thing in
// both, and builds a Config from it. Errors point at the file and line:
// "producer.properties:12: linger.ms: \"5s\" is not a number of milliseconds".
// Syntax problems the parser recovers from are kdiag lint's to report; the
// values it recovered are used, as Java's Properties.load would.
func LoadConfig(path string) (Config, error) {
	return LoadConfigWith(path, nil)
}

// LoadConfigWith is LoadConfig with overrides set on top of the file (as
// --set key=value does); path "" means no file. Errors in an override say
// "override" instead of a file and line.
func LoadConfigWith(path string, overrides map[string]string) (Config, error) {
	props := map[string]string{}
	where := map[string]string{}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return Config{}, err
		}
		defer f.Close()
		// os.Open opens a directory without complaint; reading it then
		// fails with "read DIR: is a directory", which names no fix.
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return Config{}, fmt.Errorf("%s is a directory: give the producer's .properties file", path)
		}
		file, err := readProperties(path, f)
		if err != nil {
			return Config{}, err
		}
		for k, e := range file.Effective() {
			props[k] = e.Value
			where[k] = fmt.Sprintf("%s:%d: ", path, e.KeyPos.Line)
		}
	}
	for k, v := range overrides {
		props[k] = v
		where[k] = "override: "
	}
	return parseConfig(props, func(key string) string { return where[key] })
}

func readProperties(path string, r io.Reader) (*config.File, error) {
	return config.ParseProperties(path, r)
}

// ParseOverrides reads key=value settings (--set) into a map; a later one
// wins.
func ParseOverrides(sets []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", s)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// Keys returns the keys ParseConfig understands, sorted (for help texts).
func Keys() []string {
	ks := append([]string(nil), keyList...)
	sort.Strings(ks)
	return ks
}

// keyList is every key ParseConfig understands.
var keyList = []string{"bootstrap.servers", "client.id", "acks", "linger.ms", "batch.size", "buffer.memory",
	"max.block.ms", "max.request.size", "request.timeout.ms", "delivery.timeout.ms", "retries",
	"retry.backoff.ms", "retry.backoff.max.ms", "max.in.flight.requests.per.connection",
	"metadata.max.age.ms", "connections.max.idle.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
	"socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "compression.type", "enable.idempotence",
	"allow.auto.create.topics", "security.protocol", KeyReader, KeyModel, KeyCallbackDelay}
