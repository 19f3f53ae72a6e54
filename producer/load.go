package producer

import (
	"fmt"
	"io"
	"os"

	"github.com/kdiag/kdiag/config"
)

// LoadConfig reads a Java .properties file through the config package's
// parser, the one kdiag lint uses, so that a key means the same thing in
// both, and builds a Config from it. Errors point at the file and line:
// "producer.properties:12: linger.ms: \"5s\" is not a number of milliseconds".
// Syntax problems the parser recovers from are kdiag lint's to report; the
// values it recovered are used, as Java's Properties.load would.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	return readConfig(path, f)
}

func readConfig(path string, r io.Reader) (Config, error) {
	file, err := config.ParseProperties(path, r)
	if err != nil {
		return Config{}, err
	}
	eff := file.Effective()
	return parseConfig(file.Map(), func(key string) string {
		if e, ok := eff[key]; ok {
			return fmt.Sprintf("%s:%d: ", path, e.KeyPos.Line)
		}
		return path + ": "
	})
}
