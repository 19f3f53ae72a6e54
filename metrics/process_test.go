package metrics

import "testing"

func TestVmHWM(t *testing.T) {
	tests := []struct {
		path   string
		want   float64
		wantOK bool
	}{
		{"testdata/status", 12244 * 1024, true},
		{"testdata/status_nohwm", 0, false},
		{"testdata/status_broken", 0, false},
		{"testdata/missing", 0, false},
	}
	for _, tt := range tests {
		got, ok := vmHWM(tt.path)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("vmHWM(%s) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.wantOK)
		}
	}
	// kdiag's own, as the process_ families read it.
	if got, ok := vmHWM("/proc/self/status"); !ok || got < 1<<20 {
		t.Errorf("vmHWM(/proc/self/status) = %v, %v; want at least 1 MiB", got, ok)
	}
}
