package scan

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/netstat"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// view is what the writers need beside the snapshot.
type view struct {
	hostNS uint64
	now    time.Time
}

// formats are the -o writers; the flag's help and check are built from the
// keys.
var formats = map[string]func(io.Writer, *netstat.Snapshot, view) error{
	"table": writeTable,
	"wide":  writeWide,
	"json":  writeJSON,
}

// topRemotes is how many remote endpoints a table row names.
const topRemotes = 3

// writeTable writes one row per process: pid, process, user, namespace, a
// count per state present, the oldest CLOSE_WAIT, the top remotes and the
// Kafka mark. Sockets held by no process (TIME_WAIT, or fds kdiag could not
// read) are one last row, so the columns add up to what the kernel has.
func writeTable(w io.Writer, snap *netstat.Snapshot, v view) error {
	states := presentStates(snap.Sockets)
	byPID := map[int][]netstat.Socket{}
	for _, s := range snap.Sockets {
		byPID[s.PID] = append(byPID[s.PID], s)
	}
	procs := slices.Clone(snap.Processes)
	cw := netstat.CloseWait.String()
	slices.SortFunc(procs, func(a, b netstat.Process) int {
		return cmp.Or(cmp.Compare(b.States[cw], a.States[cw]), cmp.Compare(len(byPID[b.PID]), len(byPID[a.PID])), cmp.Compare(a.PID, b.PID))
	})

	header := []string{"PID", "PROCESS", "USER", "NAMESPACE"}
	for _, st := range states {
		header = append(header, strings.ToUpper(st.Flag()))
	}
	header = append(header, "OLDEST CLOSE-WAIT", "TOP REMOTES", "KAFKA")
	var rows [][]string
	row := func(pid, name, user, ns string, socks []netstat.Socket, kafka string) {
		r := []string{pid, name, user, ns}
		count := map[netstat.State]int{}
		for _, s := range socks {
			count[s.State]++
		}
		for _, st := range states {
			r = append(r, strconv.Itoa(count[st]))
		}
		r = append(r, oldest(socks), remotes(socks), kafka)
		rows = append(rows, r)
	}
	for _, p := range procs {
		row(strconv.Itoa(p.PID), p.Name, p.User, namespace(p.Container, p.NetNS, v.hostNS), byPID[p.PID], kafkaMark(p.Kafka))
	}
	if un := byPID[0]; len(un) > 0 {
		row("-", "(no process)", "", "", un, "")
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no socket matched")
		return err
	}
	return renderTable(w, header, rows)
}

// writeWide writes one line per socket.
func writeWide(w io.Writer, snap *netstat.Snapshot, v view) error {
	names, containers := map[int]string{}, map[int]string{}
	for _, p := range snap.Processes {
		names[p.PID], containers[p.PID] = p.Name, p.Container
	}
	header := []string{"STATE", "LOCAL", "REMOTE", "RECV-Q", "SEND-Q", "AGE", "PID", "FD", "PROCESS", "NAMESPACE"}
	rows := make([][]string, 0, len(snap.Sockets))
	for _, s := range snap.Sockets {
		pid, fd, name := "-", "-", ""
		if s.PID > 0 {
			pid, fd, name = strconv.Itoa(s.PID), strconv.Itoa(s.FD), names[s.PID]
		}
		age := "-"
		if s.HasAge {
			age = human.Age(s.Age)
		}
		rows = append(rows, []string{s.State.String(), s.Local.String(), s.Remote.String(),
			strconv.FormatUint(uint64(s.RecvQ), 10), strconv.FormatUint(uint64(s.SendQ), 10),
			age, pid, fd, name, namespace(containers[s.PID], s.NetNS, v.hostNS)})
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no socket matched")
		return err
	}
	return renderTable(w, header, rows)
}

// renderTable draws a borderless, left-aligned table (as ps and ss do) and
// strips the padding tablewriter leaves at the end of lines.
func renderTable(w io.Writer, header []string, rows [][]string) error {
	var buf bytes.Buffer
	t := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Formatting: tw.CellFormatting{AutoFormat: tw.Off},
				Padding:    tw.CellPadding{Global: tw.Padding{Right: "  ", Overwrite: true}},
			},
			Row: tw.CellConfig{
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Formatting: tw.CellFormatting{AutoWrap: tw.WrapNone},
				Padding:    tw.CellPadding{Global: tw.Padding{Right: "  ", Overwrite: true}},
			},
		}),
	)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	if err := t.Render(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for line := range bytes.Lines(buf.Bytes()) {
		bw.Write(bytes.TrimRight(line, " \n"))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// presentStates returns the states of the sockets, in kernel order.
func presentStates(socks []netstat.Socket) []netstat.State {
	seen := map[netstat.State]bool{}
	for _, s := range socks {
		seen[s.State] = true
	}
	var out []netstat.State
	for st := netstat.Established; st <= netstat.NewSynRecv; st++ {
		if seen[st] {
			out = append(out, st)
		}
	}
	return out
}

// namespace names a process's place: its short container ID, "host" for
// kdiag's own network namespace, else the namespace inode.
func namespace(container string, netns, host uint64) string {
	switch {
	case container != "":
		return netstat.ShortContainerID(container)
	case netns == 0 || netns == host:
		return "host"
	}
	return "netns:" + strconv.FormatUint(netns, 10)
}

// oldest returns the age of the oldest CLOSE_WAIT socket, "-" if none or
// unknown (the /proc source has no ages).
func oldest(socks []netstat.Socket) string {
	var max time.Duration
	found := false
	for _, s := range socks {
		if s.State == netstat.CloseWait && s.HasAge && (!found || s.Age > max) {
			max, found = s.Age, true
		}
	}
	if !found {
		return "-"
	}
	return human.Age(max)
}

// remotes names the most frequent remote endpoints, "127.0.0.1:9092 (12)".
// Listeners have none.
func remotes(socks []netstat.Socket) string {
	count := map[string]int{}
	for _, s := range socks {
		if s.State != netstat.Listen && s.Remote.Port() != 0 {
			count[s.Remote.String()]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a, b)) })
	var parts []string
	for i, k := range keys {
		if i == topRemotes {
			parts = append(parts, fmt.Sprintf("+%d more", len(keys)-topRemotes))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

// kafkaMark shortens the Kafka reason for the table: what, without the
// detail in parentheses (the json output has the whole reason).
func kafkaMark(reason string) string {
	if i := strings.Index(reason, " ("); i >= 0 {
		return reason[:i]
	}
	return reason
}

// writeJSON streams the snapshot with netstat.Snapshot's JSON field names,
// one socket per line, instead of building one large string: with tens of
// thousands of sockets this keeps kdiag's memory small.
func writeJSON(w io.Writer, snap *netstat.Snapshot, _ view) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	head := struct {
		Time   time.Time `json:"time"`
		Source string    `json:"source"`
	}{snap.Time, snap.Source}
	h, err := json.Marshal(head)
	if err != nil {
		return err
	}
	bw.Write(h[:len(h)-1]) // without its closing brace
	bw.WriteString(`,"sockets":[`)
	buf := make([]byte, 0, 512)
	for i := range snap.Sockets {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
		var err error
		buf, err = appendSocketJSON(buf[:0], &snap.Sockets[i])
		if err != nil {
			return err
		}
		bw.Write(buf)
	}
	bw.WriteString("\n],\"processes\":")
	procs := snap.Processes
	if procs == nil {
		procs = []netstat.Process{}
	}
	b, err := json.Marshal(procs)
	if err != nil {
		return err
	}
	bw.Write(b)
	if len(snap.Notes) > 0 {
		bw.WriteString(`,"notes":`)
		b, err := json.Marshal(snap.Notes)
		if err != nil {
			return err
		}
		bw.Write(b)
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// appendSocketJSON appends what netstat.Socket.MarshalJSON writes, without
// its allocations (a reflection walk and a buffer per socket): with tens of
// thousands of sockets that garbage is most of a scan's. TestJSONStream...
// checks the two agree. Addresses with an IPv6 zone, which could need
// escaping, go through MarshalJSON.
func appendSocketJSON(b []byte, s *netstat.Socket) ([]byte, error) {
	if s.Local.Addr().Zone() != "" || s.Remote.Addr().Zone() != "" {
		j, err := s.MarshalJSON()
		return append(b, j...), err
	}
	b = append(b, `{"family":"`...)
	b = append(b, s.Family.String()...)
	b = append(b, `","state":"`...)
	b = append(b, s.State.String()...)
	b = append(b, `","local":"`...)
	b = s.Local.AppendTo(b)
	b = append(b, `","remote":"`...)
	b = s.Remote.AppendTo(b)
	b = append(b, `","recv_q":`...)
	b = strconv.AppendUint(b, uint64(s.RecvQ), 10)
	b = append(b, `,"send_q":`...)
	b = strconv.AppendUint(b, uint64(s.SendQ), 10)
	b = append(b, `,"inode":`...)
	b = strconv.AppendUint(b, s.Inode, 10)
	b = append(b, `,"uid":`...)
	b = strconv.AppendUint(b, uint64(s.UID), 10)
	b = append(b, `,"netns":`...)
	b = strconv.AppendUint(b, s.NetNS, 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(s.PID), 10)
	b = append(b, `,"fd":`...)
	b = strconv.AppendInt(b, int64(s.FD), 10)
	b = append(b, `,"age_ms":`...)
	if s.HasAge {
		b = strconv.AppendInt(b, s.Age.Milliseconds(), 10)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}'), nil
}
