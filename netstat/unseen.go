package netstat

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxUnseenPIDs bounds Unseen.PIDs.
const maxUnseenPIDs = 20

// unseen turns what attribution met into notes, once each, and says what the
// scan could not see: the sockets it left unattributed while some process's
// fds could not be read (their holders may be those processes), or that no
// process it read held. socks are the sockets before a --pid or --process
// filter. Each cause is named as what it is: a refusal (EACCES) is not kdiag
// running out of file descriptors (EMFILE).
func (s *Scanner) unseen(socks []Socket, stats []AttributeStats, restricted bool, n *notes) *Unseen {
	var exited, denied, outFDs []int
	var other []PIDError
	for _, st := range stats {
		exited = append(exited, st.Exited...)
		for _, pid := range st.Denied {
			if !kernelThread(s.ProcRoot, pid) {
				denied = append(denied, pid)
			}
		}
		for _, f := range st.Failed {
			if outOfFDs(f.Err) {
				outFDs = append(outFDs, f.PID)
			} else {
				other = append(other, f)
			}
		}
	}
	byState := map[string]int{}
	total := 0
	for i := range socks {
		if socks[i].Inode != 0 && socks[i].PID == 0 {
			byState[socks[i].State.String()]++
			total++
		}
	}
	if len(exited) > 0 {
		say := n.detail // churn, on a host whose processes come and go
		if restricted {
			say = n.add // a process --pid or --process named
		}
		say("%s exited during the scan", pidList(exited, nil))
	}

	var reasons []string
	var pids []int
	if len(denied) > 0 {
		why := "permission denied; run as root, or give kdiag CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, to see them"
		if s.euid == 0 {
			// Root and still refused: a ptrace restriction (Yama, an LSM)
			// or a process of another user namespace; nothing kdiag can fix.
			why = "permission denied even as root: ptrace restrictions or another user namespace"
		}
		reasons = append(reasons, fmt.Sprintf("the fds of %s could not be read (%s)", pidList(denied, s.comm), why))
		pids = append(pids, denied...)
	}
	if len(outFDs) > 0 {
		reasons = append(reasons, fmt.Sprintf("the fds of %s could not be read: kdiag ran out of file descriptors (too many open files; its limit is %s: raise ulimit -n)",
			pidList(outFDs, s.comm), nofileLimit()))
		pids = append(pids, outFDs...)
	}
	for i, f := range other {
		if i == maxReportedLines {
			reasons = append(reasons, fmt.Sprintf("and %d more processes whose fds could not be read", len(other)-i))
			break
		}
		reasons = append(reasons, fmt.Sprintf("the fds of %s could not be read (%v)", pidList([]int{f.PID}, s.comm), f.Err))
	}
	for _, f := range other {
		pids = append(pids, f.PID)
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	if len(pids) > maxUnseenPIDs {
		pids = pids[:maxUnseenPIDs]
	}

	switch {
	case total == 0:
		// Every socket was found: what could not be read held none.
		return nil
	case len(reasons) > 0:
		reason := strings.Join(reasons, "; ")
		n.add("%s unattributed: %s", cmdPlural(total, "socket", "sockets"), reason)
		return &Unseen{Sockets: byState, Reason: reason, PIDs: pids}
	case restricted || len(exited) > 0:
		// With --pid or --process the other processes' sockets are not
		// looked for; and sockets of processes that exited closed with
		// them.
		return nil
	}
	reason := "held by no process kdiag can read (a process in another PID namespace, or the kernel), or opened or closed while the scan ran"
	n.add("%s unattributed: %s", cmdPlural(total, "socket", "sockets"), reason)
	return &Unseen{Sockets: byState, Reason: reason}
}

// nofileLimit returns kdiag's own soft limit of open files, as text.
func nofileLimit() string {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return "unknown"
	}
	return strconv.FormatUint(uint64(r.Cur), 10) + " open files"
}

// comm returns the name of pid ("" when it cannot be read).
func (s *Scanner) comm(pid int) string {
	b, err := os.ReadFile(s.ProcRoot + "/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// pidList names processes for a note: "pid 1 (init)", "3 processes (pids
// 1 (init), 7 (sshd), 9 (java))", the first five of more. name, when not
// nil, gives each pid's name.
func pidList(pids []int, name func(int) string) string {
	pids = slices.Clone(pids)
	slices.Sort(pids)
	pids = slices.Compact(pids)
	one := func(pid int) string {
		s := strconv.Itoa(pid)
		if name != nil {
			if c := name(pid); c != "" {
				s += " (" + c + ")"
			}
		}
		return s
	}
	if len(pids) == 1 {
		return "pid " + one(pids[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d processes (pids ", len(pids))
	for i, p := range pids {
		if i == 5 {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one(p))
	}
	b.WriteString(")")
	return b.String()
}

// pronoun picks the singular or plural form for n.
func pronoun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
