package scan

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/table"
	"github.com/kdiag/kdiag/netstat"
)

// A broker host's view (--listen-ports, --by-client): the broker's side of
// its clients' connections, by client address (analyzer.ByClient), as a
// table or JSON; -o wide lists the sockets as any scan does.

// clientFormats are the -o writers of the broker host's view.
var clientFormats = map[string]func(io.Writer, *netstat.Snapshot, view) error{
	"table": writeClientTable,
	"wide":  writeWide,
	"json":  writeClientJSON,
}

// ClientQuery returns q ready for a broker host's view. With listen ports
// it is q; without, the ports are those the processes q selects (--pid,
// --process) listen on, found by a scan of their LISTEN sockets, and the
// processes then select nothing more: the broker's side of a connection
// it has closed (FIN_WAIT2, TIME_WAIT) is held by no process, and would be
// left out. An error when the scan fails, a --pid names no process, or
// the processes listen on no TCP port; the error says which.
func ClientQuery(ctx context.Context, scan func(context.Context, netstat.Query) (*netstat.Snapshot, error), q netstat.Query) (netstat.Query, error) {
	if len(q.ListenPorts) > 0 {
		return q, nil
	}
	snap, err := scan(ctx, netstat.Query{States: netstat.States(netstat.Listen), PIDs: q.PIDs, Process: q.Process})
	if err != nil {
		return q, &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("--by-client: finding the ports to watch: %w", err)}
	}
	if err := snap.MissingError(); err != nil {
		return q, &cmdutil.ExitError{Code: cmdutil.ExitUnknown, Err: fmt.Errorf("--by-client: %w", err)}
	}
	ports := listeningPorts(snap.Sockets)
	if len(ports) == 0 {
		what := "--pid " + pidsText(q.PIDs)
		if q.Process != nil {
			what = fmt.Sprintf("--process %q", q.Process.String())
		}
		return q, &cmdutil.ExitError{Code: cmdutil.ExitUnknown,
			Err: fmt.Errorf("--by-client: the processes %s selects listen on no TCP port (%s): give the broker's ports with --listen-ports", what, listenersSeen(snap))}
	}
	q.ListenPorts, q.PIDs, q.Process = ports, nil, nil
	return q, nil
}

// listenersSeen says what the listener scan found: the processes, or that
// none matched.
func listenersSeen(snap *netstat.Snapshot) string {
	if len(snap.Processes) == 0 {
		return "no process matched, or none holds a listening socket"
	}
	var names []string
	for _, p := range snap.Processes {
		names = append(names, fmt.Sprintf("pid %d (%s)", p.PID, p.Name))
	}
	return strings.Join(names, ", ")
}

func pidsText(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// listeningPorts returns the local ports of the LISTEN sockets of socks,
// sorted, each once.
func listeningPorts(socks []netstat.Socket) []uint16 {
	var out []uint16
	for i := range socks {
		if socks[i].State == netstat.Listen {
			out = append(out, socks[i].Local.Port())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// listener is one listening socket of the view, with its holder.
type listener struct {
	Local   netip.AddrPort `json:"local"`
	PID     int            `json:"pid"`
	Process string         `json:"process,omitempty"`
}

// listeners returns the LISTEN sockets of snap, by address, with their
// holders' names.
func listeners(snap *netstat.Snapshot) []listener {
	names := map[int]string{}
	for _, p := range snap.Processes {
		names[p.PID] = p.Name
	}
	var out []listener
	for i := range snap.Sockets {
		s := &snap.Sockets[i]
		if s.State == netstat.Listen {
			out = append(out, listener{Local: s.Local, PID: max(s.PID, 0), Process: names[s.PID]})
		}
	}
	slices.SortFunc(out, func(a, b listener) int { return a.Local.Compare(b.Local) })
	return slices.CompactFunc(out, func(a, b listener) bool { return a == b })
}

// writeClientTable writes one row per client address: its connections to
// the listening ports by state (ESTABLISHED, FIN-WAIT-2, CLOSE-WAIT,
// TIME-WAIT, the rest as OTHER) and the broker address it connects to,
// then the listeners and what the states mean on the client's side.
func writeClientTable(w io.Writer, snap *netstat.Snapshot, v view) error {
	clients := analyzer.ByClient(snap.Sockets, v.listenPorts)
	lns := listeners(snap)
	if len(clients) == 0 {
		_, err := fmt.Fprintf(w, "no client connection to %s\n", portsText(v.listenPorts))
		if err == nil && len(lns) > 0 {
			err = writeListeners(w, lns)
		}
		return err
	}
	rows := make([][]string, 0, len(clients))
	var sum analyzer.Counts
	for _, c := range clients {
		for i, n := range c.Counts {
			sum[i] += n
		}
		rows = append(rows, ClientRow(c))
	}
	if err := table.Render(w, ClientHeader, rows); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s from %s to %s\n", human.Plural(sum.Total(), "connection"), human.Plural(len(clients), "client"), portsText(v.listenPorts))
	if err := writeListeners(w, lns); err != nil {
		return err
	}
	return writeClientLegend(w, sum)
}

// ClientHeader is the header of the broker host's view's table; ClientRow
// writes a client's row under it (kdiag watch draws the same columns).
var ClientHeader = []string{"CLIENT", "ESTABLISHED", "FIN-WAIT-2", "CLOSE-WAIT", "TIME-WAIT", "OTHER", "TOP LISTENER"}

// clientStates are the states ClientHeader has a column for.
var clientStates = []netstat.State{netstat.Established, netstat.FinWait2, netstat.CloseWait, netstat.TimeWait}

// ClientRow writes c under ClientHeader.
func ClientRow(c analyzer.ClientCounts) []string {
	r := []string{c.Client.String()}
	shown := 0
	for _, st := range clientStates {
		n := c.Counts.Get(st)
		shown += n
		r = append(r, strconv.Itoa(n))
	}
	r = append(r, strconv.Itoa(c.Connections()-shown), topListener(c))
	return r
}

// topListener names the broker address most of c's connections go to,
// "127.0.0.1:9092 (12)", and how many others it uses.
func topListener(c analyzer.ClientCounts) string {
	if c.ListenerConns == 0 {
		return "-"
	}
	s := fmt.Sprintf("%s (%d)", c.Listener, c.ListenerConns)
	if c.Listeners > 1 {
		s += fmt.Sprintf(", +%d more", c.Listeners-1)
	}
	return s
}

// portsText writes ports as "port 9092" or "ports 9092,9093".
func portsText(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	if len(s) == 1 {
		return "port " + s[0]
	}
	return "ports " + strings.Join(s, ",")
}

// writeListeners says which processes listen on the view's ports.
func writeListeners(w io.Writer, lns []listener) error {
	if len(lns) == 0 {
		return nil
	}
	parts := make([]string, len(lns))
	for i, l := range lns {
		switch {
		case l.PID > 0:
			parts[i] = fmt.Sprintf("%s (pid %d %s)", l.Local, l.PID, l.Process)
		default:
			parts[i] = l.Local.String()
		}
	}
	_, err := fmt.Fprintf(w, "listening: %s\n", strings.Join(parts, ", "))
	return err
}

// writeClientLegend says, for the states of the table that mean something
// on the client's side, what that is.
func writeClientLegend(w io.Writer, sum analyzer.Counts) error {
	if n := sum.Get(netstat.FinWait2); n > 0 {
		if _, err := fmt.Fprintf(w, "FIN-WAIT-2: closed by the broker (its idle close), not yet by the client, whose side is in CLOSE_WAIT; the broker's side is gone after net.ipv4.tcp_fin_timeout, the client's may stay: kdiag scan --state close-wait on the client's host names the process\n"); err != nil {
			return err
		}
	}
	if n := sum.Get(netstat.CloseWait); n > 0 {
		if _, err := fmt.Fprintf(w, "CLOSE-WAIT: closed by the client, not yet by the broker (a broker that does not read them)\n"); err != nil {
			return err
		}
	}
	return nil
}

// writeClientJSON writes the view as one JSON object: the time and source,
// the ports, the listeners, each client's counts (analyzer.ClientCounts),
// and the notes.
func writeClientJSON(w io.Writer, snap *netstat.Snapshot, v view) error {
	out := struct {
		Time        time.Time               `json:"time"`
		Source      string                  `json:"source"`
		ListenPorts []uint16                `json:"listen_ports"`
		Listeners   []listener              `json:"listeners"`
		Clients     []analyzer.ClientCounts `json:"clients"`
		Notes       []string                `json:"notes,omitempty"`
		Unseen      *netstat.Unseen         `json:"unseen,omitempty"`
	}{snap.Time, snap.Source, v.listenPorts, listeners(snap), analyzer.ByClient(snap.Sockets, v.listenPorts), snap.Notes, snap.Unseen}
	if out.Listeners == nil {
		out.Listeners = []listener{}
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(out); err != nil {
		return err
	}
	return bw.Flush()
}
