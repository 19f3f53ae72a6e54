package sockettest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"
)

// timeWaitProc is TCP_TIME_WAIT as /proc/net/tcp's st column writes it.
const timeWaitProc = "06"

// procHex writes an address and port as /proc/net/tcp{,6} does
// (net/ipv4/tcp_ipv4.c get_tcp4_sock, net/ipv6/tcp_ipv6.c get_tcp6_sock):
// each 32-bit word of the address as the host stores it, "%08X", then ":%04X"
// of the port.
func procHex(ap netip.AddrPort) string {
	var b strings.Builder
	addr := ap.Addr().AsSlice()
	for i := 0; i+4 <= len(addr); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(addr[i:]))
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}

// procState returns the st column of the line of /proc/net/tcp{,6} (of this
// process's network namespace) with s's 4-tuple, "" when there is none.
// It is deliberately independent of netstat's parser, which tests check
// against these sockets.
func procState(s *Socket) (string, error) {
	file := "/proc/net/tcp"
	if s.Network == "tcp6" {
		file = "/proc/net/tcp6"
	}
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	local, remote := []byte(procHex(s.Local)), []byte(procHex(s.Remote))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "  sl  local_address rem_address   st ..."
		fields := bytes.Fields(sc.Bytes())
		if len(fields) > 3 && bytes.Equal(fields[1], local) && bytes.Equal(fields[2], remote) {
			return string(fields[3]), nil
		}
	}
	return "", sc.Err()
}

// waitProcState polls /proc/net/tcp{,6} until s's 4-tuple is in state st.
func waitProcState(s *Socket, st string) error {
	deadline := time.Now().Add(stateWait)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		got, err := procState(s)
		if err != nil {
			return err
		}
		if got == st {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: /proc/net shows st %q after %v, want %q", s, got, stateWait, st)
		}
		time.Sleep(delay)
	}
}
