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

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{-3 * time.Second, "0s"},
		{40 * time.Millisecond, "0s"},
		{400 * time.Millisecond, "0.4s"},
		{time.Second, "1s"},
		{1234 * time.Millisecond, "1.2s"},
		{2300 * time.Millisecond, "2.3s"},
		{5 * time.Second, "5s"},
		{9960 * time.Millisecond, "10s"},
		{12400 * time.Millisecond, "12s"},
		{59 * time.Second, "59s"},
		{59600 * time.Millisecond, "1m00s"},
		{time.Minute, "1m00s"},
		{192400 * time.Millisecond, "3m12s"},
		{65 * time.Second, "1m05s"},
		{time.Hour - 400*time.Millisecond, "1h00m"},
		{2*time.Hour + 5*time.Minute + 30*time.Second, "2h06m"},
		{2*time.Hour + 5*time.Minute + 29*time.Second, "2h05m"},
		{23*time.Hour + 59*time.Minute + 40*time.Second, "1d00h"},
		{24 * time.Hour, "1d00h"},
		{3*24*time.Hour + 4*time.Hour + 29*time.Minute, "3d04h"},
		{400 * 24 * time.Hour, "400d00h"},
	} {
		if got := Age(tc.in); got != tc.want {
			t.Errorf("Age(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
