package scan

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/table"
	"github.com/kdiag/kdiag/netstat"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// view is what the writers need beside the snapshot.
type view struct {
	hostNS uint64
	now    time.Time
	// listenPorts are the broker host's view's ports (Query.ListenPorts).
	listenPorts []uint16
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
	byPID := tally(snap.Sockets)
	procs := slices.Clone(snap.Processes)
	cw := netstat.CloseWait.String()
	slices.SortFunc(procs, func(a, b netstat.Process) int {
		return cmp.Or(cmp.Compare(b.States[cw], a.States[cw]), cmp.Compare(byPID.of(b.PID).n, byPID.of(a.PID).n), cmp.Compare(a.PID, b.PID))
	})

	header := []string{"PID", "PROCESS", "USER", "NAMESPACE"}
	for _, st := range states {
		header = append(header, stateColumn(st))
	}
	header = append(header, "OLDEST CLOSE-WAIT", "TOP REMOTES", "KAFKA")
	var rows [][]string
	row := func(pid, name, user, ns string, t *procTally, kafka string) {
		r := []string{pid, name, user, ns}
		for _, st := range states {
			c := strconv.Itoa(t.states[st])
			if st == netstat.Close && t.keptByProcess > 0 {
				c += keptMark
			}
			r = append(r, c)
		}
		r = append(r, t.oldest(), t.topRemotes(), kafka)
		rows = append(rows, r)
	}
	for _, p := range procs {
		row(strconv.Itoa(p.PID), p.Name, p.User, namespace(p.Container, p.NetNS, v.hostNS), byPID.of(p.PID), kafkaMark(p.Kafka))
	}
	if un := byPID.of(0); un.n > 0 {
		row("-", "(no process)", "", "", un, "")
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no socket matched")
		return err
	}
	if err := table.Render(w, header, rows); err != nil {
		return err
	}
	return writeKeptNote(w, snap.Sockets)
}

// keptMark marks, in the table's HELD-CLOSE counts and the wide listing's
// states, the held CLOSE sockets kept for their process
// (netstat.Socket.KeptByProcess), which writeKeptNote explains.
const keptMark = "*"

// writeKeptNote says, after a table or listing with sockets kept for their
// process, what the mark means: their remote is unknown, so the remote
// filters could not match them, and they were kept because their process
// is one the filters select.
func writeKeptNote(w io.Writer, socks []netstat.Socket) error {
	n := 0
	for i := range socks {
		if socks[i].KeptByProcess {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "%s %s (no remote known: reset out of the kernel's tables before kdiag saw %s connected) kept for %s, which %s sockets the --port/--remote/--brokers filters match or %s a Kafka client\n",
		keptMark, human.Plural(n, "held CLOSE socket"), pronoun(n, "it", "them"), pronoun(n, "its process", "their processes"),
		pronoun(n, "holds", "hold"), pronoun(n, "is", "are"))
	return err
}

// pronoun picks the singular or plural form for n.
func pronoun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// stateColumn is the table's column title for a state: CLOSE sockets are
// the fds of TCP sockets the kernel dropped (see netstat.Close), held by the
// process.
func stateColumn(st netstat.State) string {
	if st == netstat.Close {
		return "HELD-CLOSE"
	}
	return strings.ToUpper(st.Flag())
}

// endpoint writes an address, "-" when unknown (a held CLOSE socket a
// one-shot scan never saw connected).
func endpoint(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return "-"
	}
	return ap.String()
}

// procTally is what a table row says of one process's sockets, counted in
// one pass: the table of 20,000 sockets used to copy them into per-process
// lists and format every remote endpoint, 4 MB more than the scan itself.
type procTally struct {
	n      int
	states map[netstat.State]int
	// old and oldMax bound the oldest CLOSE_WAIT age, if hasOld: the
	// largest of the sockets' lower bounds and of their upper bounds (the
	// two are equal when every age is exact).
	old, oldMax time.Duration
	hasOld      bool
	remotes     map[netip.AddrPort]int
	// keptByProcess counts the held CLOSE sockets kept for their process
	// (netstat.Socket.KeptByProcess).
	keptByProcess int
}

// tallies are the procTallies of a snapshot by holder pid (0: none).
type tallies map[int]*procTally

// of returns pid's tally, an empty one if it holds no socket.
func (ts tallies) of(pid int) *procTally {
	if t := ts[pid]; t != nil {
		return t
	}
	return &procTally{}
}

// tally counts socks by holder pid.
func tally(socks []netstat.Socket) tallies {
	out := tallies{}
	for i := range socks {
		s := &socks[i]
		pid := max(s.PID, 0)
		t := out[pid]
		if t == nil {
			t = &procTally{states: map[netstat.State]int{}, remotes: map[netip.AddrPort]int{}}
			out[pid] = t
		}
		t.n++
		t.states[s.State]++
		if s.KeptByProcess {
			t.keptByProcess++
		}
		if s.State == netstat.CloseWait && s.HasAge {
			if !t.hasOld {
				t.old, t.oldMax, t.hasOld = s.Age, s.AgeMax(), true
			}
			t.old, t.oldMax = max(t.old, s.Age), max(t.oldMax, s.AgeMax())
		}
		// Listeners have no remote.
		if s.State != netstat.Listen && s.Remote.Port() != 0 {
			t.remotes[s.Remote]++
		}
	}
	return out
}

// oldest returns the age of the oldest CLOSE_WAIT socket, "-" if none or
// unknown (the /proc source has no ages).
func (t *procTally) oldest() string {
	if !t.hasOld {
		return "-"
	}
	return ageRange(t.old, t.oldMax)
}

// ageRange writes an age known between lo and hi: "12s" when they are the
// same (exact), else "4s-40s".
func ageRange(lo, hi time.Duration) string {
	if a, b := human.Age(lo), human.Age(hi); a != b {
		return a + "-" + b
	}
	return human.Age(lo)
}

// topRemotes names the most frequent remote endpoints, "127.0.0.1:9092
// (12)", ties in address order. Only those named are formatted.
func (t *procTally) topRemotes() string {
	keys := slices.Collect(maps.Keys(t.remotes))
	slices.SortFunc(keys, func(a, b netip.AddrPort) int {
		return cmp.Or(cmp.Compare(t.remotes[b], t.remotes[a]), a.Compare(b))
	})
	var parts []string
	for i, k := range keys {
		if i == topRemotes {
			parts = append(parts, fmt.Sprintf("+%d more", len(keys)-topRemotes))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", k, t.remotes[k]))
	}
	return strings.Join(parts, ", ")
}

// writeWide writes one line per socket.
func writeWide(w io.Writer, snap *netstat.Snapshot, v view) error {
	if len(snap.Sockets) == 0 {
		_, err := fmt.Fprintln(w, "no socket matched")
		return err
	}
	names, containers := map[int]string{}, map[int]string{}
	for _, p := range snap.Processes {
		names[p.PID], containers[p.PID] = p.Name, p.Container
	}
	header := []string{"STATE", "LOCAL", "REMOTE", "RECV-Q", "SEND-Q", "AGE", "PID", "FD", "PROCESS", "NAMESPACE"}
	// The cells are mostly distinct addresses, so tablewriter's width cache
	// (an LRU of 8,192 strings) only costs here: without it the listing of
	// 20,000 sockets takes 1.18 s instead of 1.33 s, 23.9 MB instead of
	// 26.6. It is the library's global switch; scan exits after its output.
	twwidth.SetCacheCapacity(0)
	err := table.Stream(w, header, len(snap.Sockets), func(i int, r []string) {
		s := &snap.Sockets[i]
		pid, fd, name := "-", "-", ""
		if s.PID > 0 {
			pid, fd, name = strconv.Itoa(s.PID), strconv.Itoa(s.FD), names[s.PID]
		}
		age := "-"
		if s.HasAge {
			age = ageRange(s.Age, s.AgeMax())
		}
		r[0], r[1], r[2] = stateCell(s), endpoint(s.Local), endpoint(s.Remote)
		r[3], r[4] = strconv.FormatUint(uint64(s.RecvQ), 10), strconv.FormatUint(uint64(s.SendQ), 10)
		r[5], r[6], r[7], r[8], r[9] = age, pid, fd, name, namespace(containers[s.PID], s.NetNS, v.hostNS)
	})
	if err != nil {
		return err
	}
	return writeKeptNote(w, snap.Sockets)
}

// stateCell is the wide listing's state: the kernel's name, and for a
// CLOSE socket (one kdiag found held: see netstat.Close) "CLOSE (held)",
// marked when it was kept for its process.
func stateCell(s *netstat.Socket) string {
	if s.State != netstat.Close {
		return s.State.String()
	}
	if s.KeptByProcess {
		return "CLOSE (held)" + keptMark
	}
	return "CLOSE (held)"
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
	if snap.Unseen != nil {
		bw.WriteString(`,"unseen":`)
		b, err := json.Marshal(snap.Unseen)
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
	if s.KeptByProcess {
		b = append(b, `","kept_by_process":true,"local":"`...)
	} else {
		b = append(b, `","local":"`...)
	}
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
	if s.IdleMS > 0 {
		b = append(b, `,"idle_ms":`...)
		b = strconv.AppendUint(b, uint64(s.IdleMS), 10)
	}
	b = append(b, `,"age_ms":`...)
	switch {
	case s.AgeExact():
		b = strconv.AppendInt(b, s.Age.Milliseconds(), 10)
	case s.HasAge:
		b = append(b, `null,"age_min_ms":`...)
		b = strconv.AppendInt(b, s.Age.Milliseconds(), 10)
		b = append(b, `,"age_max_ms":`...)
		b = strconv.AppendInt(b, s.AgeMax().Milliseconds(), 10)
	default:
		b = append(b, "null"...)
	}
	return append(b, '}'), nil
}
