package netstat

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// inuseStates are the states of the sockets /proc/net/sockstat6's "TCP6:
// inuse" counts: the full sockets hashed in the kernel's tables
// (sock_prot_inuse_add in inet_hash and inet_unhash). TIME_WAIT and
// FIN_WAIT2 can be timewait minisockets (inet_timewait_sock, counted as
// "tw" in sockstat, shared with IPv4), SYN_RECV and NEW_SYN_RECV request
// sockets: neither is counted, so a query for them always dumps IPv6.
const inuseStates = StateSet(1<<Established | 1<<SynSent | 1<<FinWait1 | 1<<Close |
	1<<CloseWait | 1<<LastAck | 1<<Listen | 1<<Closing)

// hasIPv6TCP reports whether the network namespace of pid (0: the caller's)
// may hold IPv6 TCP sockets of states: false only when states are all
// counted by sockstat6's TCP6 inuse and it reads 0. Anything it cannot read
// or parse (no IPv6 in the kernel, a fixture tree) says true: dump.
func hasIPv6TCP(procRoot string, pid int, states StateSet) bool {
	if states&^inuseStates != 0 {
		return true
	}
	who := "self"
	if pid != 0 {
		who = strconv.Itoa(pid)
	}
	b, err := os.ReadFile(filepath.Join(procRoot, who, "net", "sockstat6"))
	if err != nil {
		return true
	}
	n, ok := parseTCP6InUse(b)
	return !ok || n > 0
}

// parseTCP6InUse returns the count of the "TCP6: inuse N" line of a
// /proc/net/sockstat6 (net/ipv6/proc.c, sockstat6_seq_show).
func parseTCP6InUse(b []byte) (int, bool) { return parseInUse(b, "TCP6: inuse ") }

// tcpInUse returns the TCP sockets (IPv4 and IPv6) hashed in the network
// namespace of pid (0: the caller's), from sockstat's "TCP: inuse" and
// sockstat6's "TCP6: inuse" (net/ipv4/proc.c, net/ipv6/proc.c): a bound on
// what its dump lists, bar TIME_WAIT and request sockets. 0 when neither
// can be read.
func tcpInUse(procRoot string, pid int) int {
	who := "self"
	if pid != 0 {
		who = strconv.Itoa(pid)
	}
	n := 0
	for _, f := range []struct{ file, prefix string }{{"sockstat", "TCP: inuse "}, {"sockstat6", "TCP6: inuse "}} {
		b, err := os.ReadFile(filepath.Join(procRoot, who, "net", f.file))
		if err != nil {
			continue
		}
		if k, ok := parseInUse(b, f.prefix); ok {
			n += k
		}
	}
	return n
}

// parseInUse returns the first count of the line starting with prefix
// ("TCP: inuse 12 orphan 0 tw 3 alloc 15 mem 1").
func parseInUse(b []byte, prefix string) (int, bool) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte(prefix))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.Atoi(string(f[0]))
		return n, err == nil && n >= 0
	}
	return 0, false
}
