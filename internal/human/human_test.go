package human

import (
	"testing"
	"time"
)

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 sockets", 1: "1 socket", 2: "2 sockets"} {
		if got := Plural(n, "socket"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRound(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{1234 * time.Millisecond, 1200 * time.Millisecond},
		{12345 * time.Millisecond, 12 * time.Second},
		{time.Hour + 90*time.Second, time.Hour + 2*time.Minute},
	} {
		if got := Round(tc.in); got != tc.want {
			t.Errorf("Round(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
