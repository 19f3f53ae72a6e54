package metrics

import (
	"cmp"
	"slices"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
)

// A broker host's families (kdiag watch --listen-ports or --by-client): the
// broker's side of its clients' connections by client address, and how
// fast each client opens new ones. A broker has as many client addresses
// as the fleet has client pods, so only the busiest keep their own series
// (see clientSeriesOf); kdiag_broker_client_addresses counts them all.
var (
	famBrokerConns = Family{"kdiag_broker_client_connections", "gauge",
		"On a broker host (kdiag watch --listen-ports): the broker's side of its clients' connections by client address and state, as the kernel names it (FIN_WAIT2: closed by the broker, not yet by the client, whose side is in CLOSE_WAIT; CLOSE_WAIT: closed by the client, not by the broker), at the last scan. Clients past the busiest are summed under client=\"other\"."}
	famBrokerOpened = Family{"kdiag_broker_client_connections_opened_per_minute", "gauge",
		"On a broker host: connections each client address opened per minute over the last minute of scans (new client ports between scans: a floor, as one opened and closed between two scans is not seen). Clients past the busiest are summed under client=\"other\"."}
	famBrokerAddrs = Family{"kdiag_broker_client_addresses", "gauge",
		"On a broker host: client addresses with a connection to the listening ports at the last scan (or one opened over the last minute), those under client=\"other\" included."}
)

// DefaultMaxClients bounds the client label values of the broker host's
// families: the clients with the most connections keep their own series,
// and so do those that opened the most (a reconnect storm holds few
// connections at once), at most twice this many; the rest are summed
// under client="other".
const DefaultMaxClients = DefaultMaxRemotes

// brokerClient is one client label value's samples.
type brokerClient struct {
	client  string
	counts  analyzer.Counts
	opened  float64
	hasRate bool
}

// brokerView is the broker host's families at the last scan.
type brokerView struct {
	clients []brokerClient
	addrs   int
}

// UpdateClients records the broker host's view of the last scan: each
// client address (analyzer.ClientTracker.Clients). kdiag watch calls it
// after Update when it watches listening ports.
func (c *Collector) UpdateClients(cs []analyzer.ClientCounts) {
	v := &brokerView{clients: clientSeriesOf(cs, cmp.Or(c.MaxClients, DefaultMaxClients)), addrs: len(cs)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broker = v
}

// clientSeriesOf keeps the max clients with the most connections and the
// max that opened the most (opened > 0), each under its address, and sums
// the rest under "other", which comes last; the others in address order.
func clientSeriesOf(cs []analyzer.ClientCounts, max int) []brokerClient {
	keep := make([]bool, len(cs))
	byConns := make([]int, len(cs))
	for i := range cs {
		byConns[i] = i
	}
	byOpened := slices.Clone(byConns)
	slices.SortStableFunc(byConns, func(x, y int) int { return cmp.Compare(cs[y].Connections(), cs[x].Connections()) })
	slices.SortStableFunc(byOpened, func(x, y int) int { return cmp.Compare(cs[y].Opened, cs[x].Opened) })
	for _, i := range byConns[:min(max, len(cs))] {
		keep[i] = true
	}
	for _, i := range byOpened[:min(max, len(cs))] {
		keep[i] = keep[i] || cs[i].Opened > 0
	}
	var out []brokerClient
	other := brokerClient{client: "other"}
	rest := false
	for i, x := range cs {
		if !keep[i] {
			rest = true
			for s, n := range x.Counts {
				other.counts[s] += n
			}
			other.opened += x.OpenedPerMinute
			other.hasRate = other.hasRate || x.HasRate
			continue
		}
		out = append(out, brokerClient{client: x.Client.String(), counts: x.Counts, opened: x.OpenedPerMinute, hasRate: x.HasRate})
	}
	slices.SortFunc(out, func(x, y brokerClient) int { return cmp.Compare(x.client, y.client) })
	if rest {
		out = append(out, other)
	}
	return out
}

// writeBrokerClients writes the broker host's families, none when the
// watch has no broker view.
func (e *exposition) writeBrokerClients(v *brokerView) {
	if v == nil {
		return
	}
	for _, c := range v.clients {
		for s, n := range c.counts {
			if n > 0 {
				e.sample(famBrokerConns, float64(n), "client", c.client, "state", netstat.State(s).String())
			}
		}
	}
	for _, c := range v.clients {
		if c.hasRate {
			e.sample(famBrokerOpened, c.opened, "client", c.client)
		}
	}
	e.sample(famBrokerAddrs, float64(v.addrs))
}
