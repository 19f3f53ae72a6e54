// Package netstat is kdiag's socket source: it lists the TCP sockets of the
// host and of every network namespace its processes live in, through a
// NETLINK_SOCK_DIAG (inet_diag) dump or, as a fallback, /proc/net/tcp{,6},
// and attributes each socket to the process and file descriptor that hold it.
//
// The types in this file are shared by every part of kdiag (scan, watch, the
// analyzer, repro) and by the JSON records of `kdiag watch --record`; change
// their JSON names only with a migration of recorded files.
package netstat

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// State is a TCP state numbered as the kernel numbers it
// (include/net/tcp_states.h, enum TCP_ESTABLISHED = 1 ...).
type State uint8

// TCP states, kernel numbering.
const (
	Established State = 1 + iota
	SynSent
	SynRecv
	FinWait1
	FinWait2
	TimeWait
	Close
	CloseWait
	LastAck
	Listen
	Closing
	NewSynRecv
	maxState
)

var stateNames = [...]string{
	Established: "ESTABLISHED",
	SynSent:     "SYN_SENT",
	SynRecv:     "SYN_RECV",
	FinWait1:    "FIN_WAIT1",
	FinWait2:    "FIN_WAIT2",
	TimeWait:    "TIME_WAIT",
	Close:       "CLOSE",
	CloseWait:   "CLOSE_WAIT",
	LastAck:     "LAST_ACK",
	Listen:      "LISTEN",
	Closing:     "CLOSING",
	NewSynRecv:  "NEW_SYN_RECV",
}

// String returns the state as the kernel names it, e.g. "CLOSE_WAIT".
func (s State) String() string {
	if s > 0 && s < maxState {
		return stateNames[s]
	}
	return fmt.Sprintf("STATE_%d", uint8(s))
}

// Flag returns the state written as a flag value, e.g. "close-wait".
func (s State) Flag() string {
	return strings.ToLower(strings.ReplaceAll(s.String(), "_", "-"))
}

// MarshalText writes the kernel's name, so JSON carries "CLOSE_WAIT".
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText accepts any spelling ParseState accepts.
func (s *State) UnmarshalText(b []byte) error {
	v, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseState accepts a state in the kernel's spelling (CLOSE_WAIT), the flag
// spelling (close-wait) or without separators (closewait), any case.
func ParseState(s string) (State, error) {
	norm := strings.ToUpper(strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.TrimSpace(s)))
	for st := Established; st < maxState; st++ {
		if strings.ReplaceAll(stateNames[st], "_", "") == norm {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown TCP state %q (want one of %s)", s, strings.Join(StateFlagNames(), ", "))
}

// StateFlagNames lists every state in flag spelling, in kernel order.
func StateFlagNames() []string {
	out := make([]string, 0, int(maxState)-1)
	for st := Established; st < maxState; st++ {
		out = append(out, st.Flag())
	}
	return out
}

// StateSet is a set of states as the bitmask inet_diag_req_v2.idiag_states
// takes: bit 1<<state for each state wanted.
type StateSet uint32

// AllStates is every TCP state.
const AllStates StateSet = (1<<maxState - 1) &^ 1

// States returns the set of the given states.
func States(states ...State) StateSet {
	var set StateSet
	for _, s := range states {
		set |= 1 << s
	}
	return set
}

// Has reports whether s is in the set.
func (set StateSet) Has(s State) bool { return set&(1<<s) != 0 }

// ParseStateSet parses a comma list of states ("close-wait,established");
// "" or "all" is every state.
func ParseStateSet(list string) (StateSet, error) {
	list = strings.TrimSpace(list)
	if list == "" || strings.EqualFold(list, "all") {
		return AllStates, nil
	}
	var set StateSet
	for _, part := range strings.Split(list, ",") {
		st, err := ParseState(part)
		if err != nil {
			return 0, err
		}
		set |= 1 << st
	}
	return set, nil
}

// Family is an address family: AF_INET (2) or AF_INET6 (10).
type Family uint8

// Address families, as in <sys/socket.h>.
const (
	IPv4 Family = 2
	IPv6 Family = 10
)

// String returns "tcp4" or "tcp6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "tcp4"
	case IPv6:
		return "tcp6"
	}
	return fmt.Sprintf("family%d", uint8(f))
}

// MarshalText writes "tcp4" or "tcp6".
func (f Family) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads "tcp4" or "tcp6".
func (f *Family) UnmarshalText(b []byte) error {
	switch string(b) {
	case "tcp4":
		*f = IPv4
	case "tcp6":
		*f = IPv6
	default:
		return fmt.Errorf("unknown family %q", b)
	}
	return nil
}

// Socket is one TCP socket: the fields of inet_diag_msg
// (include/uapi/linux/inet_diag.h) or of a /proc/net/tcp line, the tcp_info
// timer kdiag uses for age, and the process that holds it.
type Socket struct {
	Family Family `json:"family"`
	State  State  `json:"state"`
	// HasAge says whether Age is known (see Age). It sits here, next to
	// the other one-byte fields, for the padding: 128 bytes a socket
	// instead of 136. (It is not in the JSON, so no JSON field moves.)
	HasAge bool `json:"-"`
	// KeptByProcess says the socket was kept for its process, not for its
	// address: a held CLOSE socket of unknown remote, which no --port,
	// --remote or --brokers filter can match, kept because the filters
	// select its process (see Query). It sits in the byte of padding
	// after HasAge: the Socket stays 128 bytes.
	KeptByProcess bool `json:"kept_by_process,omitempty"`
	// IdleMS is, for a CLOSE_WAIT socket whose FIN time is exact (AgeAt
	// span 0), how long the connection had carried no data when the peer's
	// FIN came, in milliseconds: tcp_info's time since the last data sent
	// or received, less the age. For a Kafka client that is how long the
	// broker let the connection idle before it closed it: its
	// connections.max.idle.ms. 0 when unknown. It sits in the padding
	// before Local.
	IdleMS uint32         `json:"idle_ms,omitempty"`
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// RecvQ and SendQ are idiag_rqueue and idiag_wqueue: for a connected
	// socket, bytes not yet read by the application and bytes not yet
	// acknowledged by the peer; for a listener, the accept backlog.
	RecvQ uint32 `json:"recv_q"`
	SendQ uint32 `json:"send_q"`
	// Inode is the socket's inode number, the key to /proc/<pid>/fd links
	// ("socket:[12345]"). 0 for sockets no longer owned by a file (TIME_WAIT).
	Inode uint64 `json:"inode"`
	UID   uint32 `json:"uid"`
	// AgeSpan, when HasAge, says how exact Age is: 0, exact; else the age
	// lies between Age and Age+AgeSpan, in milliseconds (see Age). It sits
	// in UID's padding: the Socket stays 128 bytes.
	AgeSpan uint32 `json:"-"`
	// Age is, when HasAge is true, how long ago the socket last received,
	// from tcp_info. For a CLOSE_WAIT socket it is how long ago the peer's
	// FIN came, as exactly as the kernel tells: the FIN updates
	// tcpi_last_ack_recv (it carries an ACK) but not tcpi_last_data_recv,
	// and any ACK after it (a keepalive probe's answer, or one for data
	// sent after the FIN) updates the first again. So Age is
	// tcpi_last_ack_recv, exact (AgeSpan 0) when no ACK can have come
	// after the FIN: nothing was sent since the peer's last data, and
	// either no keepalive timer is armed (idiag_timer 0) or the last data
	// came less than a keepalive period ago (tcpi_last_data_recv below
	// tcpi_last_ack_recv + idiag_expires, which is at most the period: the
	// first probe goes a period after the last thing received). Otherwise
	// the FIN came between Age and tcpi_last_data_recv ago (AgeSpan is the
	// difference): no later than the last ACK, no earlier than the last
	// data. Other states' Age is the time since anything was received, and
	// AgeSpan 0. /proc/net/tcp has no such field, so sockets from the
	// fallback have HasAge false. A repeated scan (Scanner without NoCache)
	// asks tcp_info only every Scanner.InfoEvery and only for CLOSE_WAIT: in
	// between, a CLOSE_WAIT socket's Age is carried forward from the last
	// such scan (and narrowed by each), and other states have HasAge false.
	// With Scanner.Transitions (watch --events) a CLOSE_WAIT that began
	// during the watch has its exact age from the kernel's record of it,
	// and a held CLOSE socket (state Close) the time since its reset.
	Age time.Duration `json:"-"`
	// NetNS is the inode of the network namespace the socket lives in
	// (/proc/<pid>/ns/net), 0 when unknown.
	NetNS uint64 `json:"netns"`
	// PID and FD are the process and descriptor holding the socket; 0 and -1
	// when unattributed.
	PID int `json:"pid"`
	FD  int `json:"fd"`
}

// socketJSON adds age_ms, present only when the age is known exactly, and
// age_min_ms and age_max_ms, present only when it is known between them.
type socketJSON struct {
	socketAlias
	AgeMS    *int64 `json:"age_ms"`
	AgeMinMS *int64 `json:"age_min_ms,omitempty"`
	AgeMaxMS *int64 `json:"age_max_ms,omitempty"`
}

// AgeMax is the most the socket's age can be: Age plus AgeSpan.
func (s *Socket) AgeMax() time.Duration { return s.Age + time.Duration(s.AgeSpan)*time.Millisecond }

// AgeExact reports whether the age is known and exact.
func (s *Socket) AgeExact() bool { return s.HasAge && s.AgeSpan == 0 }

type socketAlias Socket

// MarshalJSON writes the socket with age_ms (null when unknown).
func (s Socket) MarshalJSON() ([]byte, error) {
	j := socketJSON{socketAlias: socketAlias(s)}
	switch {
	case s.AgeExact():
		ms := s.Age.Milliseconds()
		j.AgeMS = &ms
	case s.HasAge:
		lo, hi := s.Age.Milliseconds(), s.AgeMax().Milliseconds()
		j.AgeMinMS, j.AgeMaxMS = &lo, &hi
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Socket) UnmarshalJSON(b []byte) error {
	var j socketJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Socket(j.socketAlias)
	switch {
	case j.AgeMS != nil:
		s.Age, s.HasAge = time.Duration(*j.AgeMS)*time.Millisecond, true
	case j.AgeMinMS != nil && j.AgeMaxMS != nil && *j.AgeMaxMS >= *j.AgeMinMS:
		s.Age, s.HasAge = time.Duration(*j.AgeMinMS)*time.Millisecond, true
		s.AgeSpan = uint32(min(*j.AgeMaxMS-*j.AgeMinMS, 1<<32-1))
	}
	return nil
}

// Attributed reports whether the socket was mapped to a process.
func (s Socket) Attributed() bool { return s.PID > 0 }

// Process is what kdiag knows of a process that holds sockets.
type Process struct {
	PID     int    `json:"pid"`
	Name    string `json:"name"`
	Cmdline string `json:"cmdline"`
	User    string `json:"user"`
	UID     uint32 `json:"uid"`
	// StartTime is when the process started (from /proc/<pid>/stat).
	StartTime time.Time `json:"start_time"`
	// NetNS is the inode of /proc/<pid>/ns/net.
	NetNS uint64 `json:"netns"`
	// Container is the container ID from /proc/<pid>/cgroup, "" on the host.
	Container string `json:"container,omitempty"`
	// Kafka says why kdiag takes the process for a Kafka client
	// ("kafka-clients on class path", "maps librdkafka", "sockets to
	// brokers"); "" when it does not.
	Kafka string `json:"kafka,omitempty"`
	// States counts the process's sockets by state name.
	States map[string]int `json:"states"`
}

// Unseen is what a scan could not see: the sockets it could not attribute
// to a process while some process's fds could not be read, or no process it
// could read held them.
type Unseen struct {
	// Sockets counts the unattributed sockets (inode not 0, so held by some
	// file) by state name. With --pid or --process they are counted before
	// the filter: any of them may be the selected processes'.
	Sockets map[string]int `json:"sockets"`
	// Reason says why, in words: "the fds of 3 processes could not be read
	// (permission denied; ...)".
	Reason string `json:"reason"`
	// PIDs are the processes whose fds could not be read, at most 20.
	PIDs []int `json:"pids,omitempty"`
}

// Snapshot is one scan: every socket that matched the query, the processes
// holding them, and the notes about what could not be seen. It is the unit of
// `kdiag watch --record` (one JSON line each) and of the analyzer.
type Snapshot struct {
	Time      time.Time `json:"time"`
	Source    string    `json:"source"` // "netlink" or "proc"
	Sockets   []Socket  `json:"sockets"`
	Processes []Process `json:"processes"`
	// Notes are conditions that limited the scan but did not stop it: a
	// process that exited, fds that could not be read, a namespace that could
	// not be entered. Each is said once per scan.
	Notes []string `json:"notes,omitempty"`
	// Unseen, when set, says that some sockets of the query's states could
	// not be attributed because kdiag could not read the processes that may
	// hold them, and why. A check or a verdict that finds nothing wrong
	// could be wrong by that many sockets.
	Unseen *Unseen `json:"unseen,omitempty"`
	// Unchanged is true when the kernel reported no state change of a
	// socket of the query's states since the last dump (Scanner.Changes),
	// so the scan served that dump's sockets again, ages advanced, rather
	// than dump: the counts are current, Recv-Q, Send-Q and holders are
	// as of that dump (at most Scanner.RefreshEvery ago).
	Unchanged bool `json:"unchanged,omitempty"`
	// Details are what a host whose processes and connections come and go
	// makes of nearly every scan, and that limits nothing the scan
	// reports: sockets closed while it ran (left out), processes that
	// exited during it (their fds closed with them). Each is said once
	// per scan; commands say them only when asked (-v), so that a scan or
	// a watch on a busy host is not a stream of them.
	Details []string `json:"details,omitempty"`
	// HeldLeftOut counts, for a scan with Scanner.CountHeld whose query
	// leaves CLOSE out, the held CLOSE sockets it left out (a note says
	// it, and how to see them); -1 when it could not count them (a note
	// says why). Not in the JSON: the notes carry it.
	HeldLeftOut int `json:"-"`
	// Missing are the pids of Query.PIDs that named no process when the
	// scan listed the processes, sorted: a --pid that names no process is
	// said, in every command, as MissingError says it (and makes the
	// command's result UNKNOWN), not as a note.
	Missing []int `json:"missing_pids,omitempty"`
	// Dump numbers the Scanner's dumps, from 1: an Unchanged snapshot has
	// the Dump of the one whose sockets it serves, so that a consumer that
	// saw that one can skip the sockets (analyzer.Tracker does). 0 when
	// unknown, as in a snapshot read back from a recording.
	Dump uint64 `json:"-"`
}

// NoProcessError is what a --pid that names no process is, in scan, watch
// and doctor alike: one wording, said once, and an UNKNOWN result (the
// command cannot tell anything of a process that is not there).
type NoProcessError struct {
	// PIDs are the pids that name no process, sorted.
	PIDs []int
}

// Error says "--pid 999999 names no process (no /proc/999999)", as
// doctor says it, one such clause a pid, joined by "; ".
func (e *NoProcessError) Error() string {
	parts := make([]string, len(e.PIDs))
	for i, p := range e.PIDs {
		n := strconv.Itoa(p)
		parts[i] = "--pid " + n + " names no process (no /proc/" + n + ")"
	}
	return strings.Join(parts, "; ")
}

// MissingError returns the snapshot's Missing pids as a *NoProcessError,
// nil when every pid the query named was there.
func (s *Snapshot) MissingError() error {
	if len(s.Missing) == 0 {
		return nil
	}
	return &NoProcessError{PIDs: s.Missing}
}
