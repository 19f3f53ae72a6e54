package cmdutil

import (
	"fmt"
	"log/slog"
	"strings"
)

// ParseLogLevel reads a --log-level value: debug, info (or empty) or warn.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	}
	return 0, fmt.Errorf("%q: want debug, info or warn", s)
}
