package netstat

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Query says which sockets a Scan reports. The zero value (after States is
// set) reports every socket of those states; each non-empty field narrows it.
type Query struct {
	// States are the TCP states wanted; the kernel filters on them
	// (inet_diag_req_v2.idiag_states). 0 means AllStates.
	States StateSet
	// PIDs limits the scan to these processes: only their fds are read and
	// only their sockets reported.
	PIDs []int
	// Process limits the scan to processes whose name or command line
	// matches.
	Process *regexp.Regexp
	// KeepOthers keeps, in a scan PIDs or Process restrict, the other
	// sockets of the selected processes' network namespaces toward an
	// address a selected process has a socket to, with PID 0: those no
	// process holds (TIME_WAIT, orphans in FIN_WAIT or LAST_ACK) and other
	// processes' (not attributed). A restricted scan otherwise leaves them
	// out. They are what doctor counts the ephemeral ports in use toward a
	// broker from; sockets toward other addresses take none of those.
	KeepOthers bool
	// RemotePorts keeps sockets whose remote port is one of these.
	RemotePorts []uint16
	// ListenPorts keeps sockets whose local port is one of these: the
	// ports a server listens on (a Kafka broker's 9092), whose side of its
	// clients' connections they select, listeners included. The kernel
	// applies it (an inet_diag bytecode filter on the source port, see
	// sportFilter) when the dump need not list every socket, that is when
	// the states leave CLOSE out (see held.go's tableStates).
	ListenPorts []uint16
	// Remotes keeps sockets whose remote end matches one of these.
	Remotes []Endpoint
	// Brokers are the Kafka brokers (a bootstrap list): sockets to them mark
	// their process a Kafka client, and only sockets to them are reported.
	// Without brokers, ports 9092-9094 mark a Kafka client and nothing is
	// dropped.
	Brokers []Endpoint
}

// Held CLOSE sockets and the address filters (RemotePorts, Remotes,
// Brokers, ListenPorts). A held CLOSE socket (state Close: a CLOSE_WAIT socket a
// keepalive RST took out of every kernel table, its fd still held; see
// held.go) has no remote address unless a repeated scan saw it in
// CLOSE_WAIT first, so no address filter can match it. It is the same leak
// as the CLOSE_WAIT it was, one stage later (a Go client's moves there
// within about a minute), so a scan with remote filters keeps the held
// CLOSE sockets of unknown remote of the processes the filters select,
// marked Socket.KeptByProcess. A process is selected when it
//
//   - holds a socket the remote filters match, in any state the scan
//     dumped (a query with Close dumps every state: an ESTABLISHED
//     connection to a broker selects its process for --state
//     close-wait,close), or held one at an earlier scan of the same
//     Scanner (a repeated scan, kdiag watch: the process's sockets to the
//     broker may all be held CLOSE by now);
//   - or, with Brokers, is a Kafka client by its own files (kafka-clients
//     on its class path or open, librdkafka mapped: see kafkaReason), not
//     by its sockets.
//
// A held CLOSE socket whose remote a repeated scan knows is matched by its
// address, as any other socket.

// remoteFiltered reports whether the query has address filters (remote
// ones, or ListenPorts), which a held CLOSE socket of unknown address
// cannot match.
func (q Query) remoteFiltered() bool {
	return len(q.RemotePorts) > 0 || len(q.Remotes) > 0 || len(q.Brokers) > 0 || len(q.ListenPorts) > 0
}

// remoteKey names the query's address filters, so that a repeated scan
// forgets the processes earlier scans selected when they change.
func (q Query) remoteKey() string {
	return fmt.Sprint(q.RemotePorts, q.Remotes, q.Brokers, q.ListenPorts)
}

// states returns the wanted states, AllStates for 0.
func (q Query) states() StateSet {
	if q.States == 0 {
		return AllStates
	}
	return q.States
}

// matchSocket applies the socket-level filters: local ports, remote
// ports, remotes and brokers. A listener's remote is the unspecified
// address, port 0.
func (q Query) matchSocket(s *Socket) bool {
	return q.states().Has(s.State) && q.matchAddrs(s.Local, s.Remote)
}

// matchAddrs applies the address filters alone: local ports, remote ports,
// remotes and brokers.
func (q Query) matchAddrs(local, remote netip.AddrPort) bool {
	if len(q.ListenPorts) > 0 && !slices.Contains(q.ListenPorts, local.Port()) {
		return false
	}
	return q.matchRemote(remote)
}

// matchRemote applies the remote filters alone: remote ports, remotes and
// brokers.
func (q Query) matchRemote(ap netip.AddrPort) bool {
	if len(q.RemotePorts) > 0 && !slices.Contains(q.RemotePorts, ap.Port()) {
		return false
	}
	if len(q.Remotes) > 0 && !matchAny(q.Remotes, ap) {
		return false
	}
	if len(q.Brokers) > 0 && !matchAny(q.Brokers, ap) {
		return false
	}
	return true
}

// RemotePortSet returns ports such that every socket the query keeps has its
// remote port among them, sorted, or nil when it may keep any port: the
// ports of RemotePorts, else of Brokers, else of Remotes, the first of them
// whose every entry names a port (the filters all apply, so any one bounds
// the ports). `kdiag watch --events` counts only these ports' changes.
func (q Query) RemotePortSet() []uint16 {
	if len(q.RemotePorts) > 0 {
		return sortedPorts(q.RemotePorts)
	}
	for _, eps := range [][]Endpoint{q.Brokers, q.Remotes} {
		if len(eps) == 0 || slices.ContainsFunc(eps, func(e Endpoint) bool { return e.Port == 0 }) {
			continue
		}
		ports := make([]uint16, len(eps))
		for i, e := range eps {
			ports[i] = e.Port
		}
		return sortedPorts(ports)
	}
	return nil
}

func sortedPorts(p []uint16) []uint16 {
	p = slices.Clone(p)
	slices.Sort(p)
	return slices.Compact(p)
}

func matchAny(eps []Endpoint, ap netip.AddrPort) bool {
	for _, e := range eps {
		if e.Match(ap) {
			return true
		}
	}
	return false
}

// Endpoint is a remote end to match: a host's addresses and a port.
type Endpoint struct {
	// Host is as the user wrote it (a name or an address).
	Host string
	// Addrs are Host's addresses (resolved once, when parsed); empty means
	// any address.
	Addrs []netip.Addr
	// Port is the port, 0 for any.
	Port uint16
}

// String writes the endpoint as it was given, host:port or host.
func (e Endpoint) String() string {
	if e.Port == 0 {
		return e.Host
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// Match reports whether ap is this endpoint. IPv4-mapped IPv6 addresses
// (::ffff:127.0.0.1, as dual-stack sockets show IPv4 peers) match their IPv4
// form.
func (e Endpoint) Match(ap netip.AddrPort) bool {
	if e.Port != 0 && ap.Port() != e.Port {
		return false
	}
	if len(e.Addrs) == 0 {
		return true
	}
	a := ap.Addr().Unmap()
	for _, x := range e.Addrs {
		if x.Unmap() == a {
			return true
		}
	}
	return false
}

// resolveTimeout bounds the name lookups of ParseEndpoint.
const resolveTimeout = 5 * time.Second

// ParseEndpoint parses HOST, HOST:PORT, [IPv6]:PORT or an IPv6 address, and
// resolves HOST when it is a name. Port 0 or no port matches any port.
func ParseEndpoint(s string) (Endpoint, error) {
	return parseEndpoint(s, 0)
}

// ParseBrokers parses a bootstrap list, "h1:9092,h2:9092", as Kafka clients
// take bootstrap.servers; an entry without a port gets 9092. Names are
// resolved.
func ParseBrokers(list string) ([]Endpoint, error) {
	var out []Endpoint
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		// bootstrap.servers entries may carry a security protocol prefix.
		if i := strings.Index(part, "://"); i >= 0 {
			part = part[i+3:]
		}
		e, err := parseEndpoint(part, 9092)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("broker list %q names no broker (want host:port[,host:port...])", list)
	}
	return out, nil
}

func parseEndpoint(s string, defPort uint16) (Endpoint, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Endpoint{}, fmt.Errorf("empty endpoint (want HOST[:PORT])")
	}
	host, port := s, defPort
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		// A bare address, IPv6 included ("::1", "[::1]").
		return Endpoint{Host: a.String(), Addrs: []netip.Addr{a}, Port: defPort}, nil
	}
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return Endpoint{}, fmt.Errorf("endpoint %q: port %q is not a number from 0 to 65535", s, p)
		}
		host, port = h, uint16(n)
	} else if strings.Contains(s, ":") && !strings.Contains(s, "]") {
		return Endpoint{}, fmt.Errorf("endpoint %q: %v (write IPv6 with a port as [addr]:port)", s, err)
	}
	if host == "" {
		return Endpoint{}, fmt.Errorf("endpoint %q: no host", s)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return Endpoint{Host: host, Addrs: []netip.Addr{a}, Port: port}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %q: cannot resolve %s: %w", s, host, err)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return Endpoint{Host: host, Addrs: slices.Compact(addrs), Port: port}, nil
}
