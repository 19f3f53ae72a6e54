package netstat

import "testing"

// TestPidList: notes name the processes they are about, one as "pid N
// (name)" and several as a count with the first five.
func TestPidList(t *testing.T) {
	name := func(pid int) string { return map[int]string{1: "init", 7: "sshd"}[pid] }
	for _, tc := range []struct {
		pids []int
		want string
	}{
		{[]int{1}, "pid 1 (init)"},
		{[]int{9}, "pid 9"},
		{[]int{7, 1, 7}, "2 processes (pids 1 (init), 7 (sshd))"},
		{[]int{1, 2, 3, 4, 5, 6, 7}, "7 processes (pids 1 (init), 2, 3, 4, 5, ...)"},
	} {
		if got := pidList(tc.pids, name); got != tc.want {
			t.Errorf("pidList(%v) = %q, want %q", tc.pids, got, tc.want)
		}
	}
	if got := pronoun(1, "its sockets were", "their sockets were"); got != "its sockets were" {
		t.Errorf("pronoun(1) = %q", got)
	}
}
