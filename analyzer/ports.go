package analyzer

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/kdiag/kdiag/netstat"
)

// PortUse is what the sockets of a network namespace toward one broker
// address showed at the last scan, whoever holds them: TIME_WAIT has no
// holder, and every socket toward the address takes a port of the
// ephemeral range from the connections a client can open to it.
type PortUse struct {
	Remote   netip.AddrPort `json:"remote"`
	TimeWait int            `json:"time_wait"`
	SynSent  int            `json:"syn_sent"`
	// InUse counts the sockets toward Remote whose local port is in the
	// ephemeral range, in any state.
	InUse int `json:"in_use"`
}

// PortEvidence is the ephemeral port range of a process's network
// namespace and its use toward each broker the process connects to.
type PortEvidence struct {
	Low, High int
	Remotes   []PortUse
}

// Size is the number of ports in the range.
func (e *PortEvidence) Size() int { return e.High - e.Low + 1 }

// Busiest returns the broker address with the most ports in use.
func (e *PortEvidence) Busiest() (PortUse, bool) {
	if len(e.Remotes) == 0 {
		return PortUse{}, false
	}
	return slices.MaxFunc(e.Remotes, func(a, b PortUse) int { return a.InUse - b.InUse }), true
}

// CountPorts counts, in socks (one scan, with the sockets no process holds:
// netstat.Query.KeepOthers), the sockets toward each broker pid has a
// socket to, in pid's network namespace. It returns nil when the range is
// not known or pid has no socket to a broker. Linux picks a connect()'s
// port per destination (__inet_hash_connect checks the 4-tuple), so the
// range is spent per broker address, not for the host.
func CountPorts(socks []netstat.Socket, pid int, isBroker func(netip.AddrPort) bool, sc *netstat.TCPSysctls) *PortEvidence {
	if sc == nil || sc.Ports() == 0 || isBroker == nil {
		return nil
	}
	var ns uint64
	byRemote := map[netip.AddrPort]*PortUse{}
	for _, x := range socks {
		if x.PID == pid && x.State != netstat.Listen && x.Remote.IsValid() && isBroker(x.Remote) {
			ns = x.NetNS
			if byRemote[x.Remote] == nil {
				byRemote[x.Remote] = &PortUse{Remote: x.Remote}
			}
		}
	}
	if len(byRemote) == 0 {
		return nil
	}
	for _, x := range socks {
		u := byRemote[x.Remote]
		if u == nil || x.NetNS != ns {
			continue
		}
		switch x.State {
		case netstat.TimeWait:
			u.TimeWait++
		case netstat.SynSent:
			u.SynSent++
		}
		if p := int(x.Local.Port()); p >= sc.PortLow && p <= sc.PortHigh {
			u.InUse++
		}
	}
	e := &PortEvidence{Low: sc.PortLow, High: sc.PortHigh}
	for _, u := range byRemote {
		e.Remotes = append(e.Remotes, *u)
	}
	slices.SortFunc(e.Remotes, func(a, b PortUse) int { return a.Remote.Compare(b.Remote) })
	return e
}

// portWarnShare is the share of the ephemeral range in use toward one
// broker at which the reconnect finding is a warning whatever its rate:
// at the range's end connect() fails with EADDRNOTAVAIL ("Cannot assign
// requested address").
const portWarnShare = 0.5

// portWords writes the port evidence: "Ports: toward 10.0.0.1:9092, 35
// TIME_WAIT and 0 SYN_SENT (any holder); 38 of the 28232 ephemeral ports
// (32768-60999) in use toward it (0.1%)."
func portWords(e *PortEvidence) (string, float64) {
	u, ok := e.Busiest()
	if !ok {
		return "", 0
	}
	share := float64(u.InUse) / float64(e.Size())
	s := fmt.Sprintf("Ports: toward %s, %d TIME_WAIT and %d SYN_SENT (any holder); %d of the %d ephemeral ports (%d-%d) in use toward it (%.1f%%)",
		netip.AddrPortFrom(u.Remote.Addr().Unmap(), u.Remote.Port()), u.TimeWait, u.SynSent, u.InUse, e.Size(), e.Low, e.High, 100*share)
	if len(e.Remotes) > 1 {
		s += fmt.Sprintf(", the most of its %d brokers", len(e.Remotes))
	}
	return s + ".", share
}
