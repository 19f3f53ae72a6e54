package cmdutil

import (
	"log/slog"
	"testing"
)

func TestParseLogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "": slog.LevelInfo, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "warning": slog.LevelWarn} {
		got, err := ParseLogLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLogLevel("trace"); err == nil {
		t.Error(`ParseLogLevel("trace") accepted`)
	}
}
