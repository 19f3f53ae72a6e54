package netstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// TCPSysctls are the TCP settings of one network namespace that decide how
// a connection the peer closed ends. They are per-namespace sysctls
// (net.ipv4.*: struct netns_ipv4 in include/net/netns/ipv4.h, set up by
// tcp_sk_init in net/ipv4/tcp_ipv4.c for each new namespace with the
// kernel's defaults, not the host's values), so a container or a test's
// `unshare -n` can have its own: read them from the socket's namespace,
// never assume the defaults.
//
// They are the values of the namespace read. The far end of a connection
// uses its own host's: tcp_fin_timeout bounds the broker's FIN_WAIT_2 side
// only when the broker runs in this namespace (loopback, a test, a broker
// in the same pod).
type TCPSysctls struct {
	// NetNS is the namespace's inode, as Socket.NetNS and Process.NetNS
	// give it (0 when it could not be read: a fixture tree).
	NetNS uint64
	// FinTimeout is net.ipv4.tcp_fin_timeout (default 60 s): how long an
	// orphaned socket stays in FIN_WAIT_2 (net/ipv4/tcp.c, tcp_close).
	// That is the broker's side of a connection it closed once the client
	// has ACKed its FIN; after it the client's next segment, a keepalive
	// probe, draws an RST, and the client's CLOSE_WAIT socket leaves
	// every kernel table: held CLOSE.
	FinTimeout time.Duration
	// KeepaliveTime is net.ipv4.tcp_keepalive_time (default 7200 s): the
	// idle time before the first keepalive probe, for a socket with
	// SO_KEEPALIVE and no TCP_KEEPIDLE of its own (Go's net package sets
	// its own, 15 s; Java and librdkafka do not).
	KeepaliveTime time.Duration
	// KeepaliveIntvl is net.ipv4.tcp_keepalive_intvl (default 75 s): the
	// time between probes, for a socket without TCP_KEEPINTVL.
	KeepaliveIntvl time.Duration
	// KeepaliveProbes is net.ipv4.tcp_keepalive_probes (default 9): the
	// probes unanswered before the connection is dropped, for a socket
	// without TCP_KEEPCNT.
	KeepaliveProbes int
	// PortLow and PortHigh are net.ipv4.ip_local_port_range (default
	// 32768 60999): the ephemeral ports connect() picks from. A client
	// that connects without bind() may reuse a port toward another
	// destination (__inet_hash_connect checks the 4-tuple), so the range
	// runs out per destination address and port: a reconnect storm toward
	// one broker, its TIME_WAIT lasting 60 s, empties it for that broker.
	PortLow, PortHigh int
}

// Ports is the size of the ephemeral port range, 0 when it was not read.
func (s TCPSysctls) Ports() int {
	if s.PortHigh < s.PortLow || s.PortLow == 0 {
		return 0
	}
	return s.PortHigh - s.PortLow + 1
}

// sysctlFiles are the files TCPSysctls is read from, under
// <procRoot>/sys/net/ipv4, in this order (readTCPSysctls).
var sysctlFiles = [...]string{"tcp_fin_timeout", "tcp_keepalive_time", "tcp_keepalive_intvl", "tcp_keepalive_probes"}

// portRangeFile is read after sysctlFiles: two integers, not one.
const portRangeFile = "ip_local_port_range"

// NetSysctls reads the TCPSysctls of pid's network namespace (pid 0:
// kdiag's own) now, uncached (SysctlCache reads each namespace once).
//
// /proc/sys/net answers for the network namespace of the task that opens
// the file (net_ctl_header_lookup in net/sysctl_net.c takes
// current->nsproxy->net_ns), whatever /proc the path goes through:
// /proc/<pid>/root/proc/sys/net of a process in another namespace still
// gives kdiag's own values. So for another namespace a locked OS thread
// enters it (setns, which needs CAP_SYS_ADMIN), opens the files and goes
// back; a file opened there keeps answering for that namespace. Without
// the privilege, or when the namespace cannot be opened, the error wraps
// ErrNetNSUnavailable (and fs.ErrNotExist when the process has exited).
// With a procRoot other than /proc (a fixture tree) the files are read
// under procRoot/sys/net/ipv4 whatever the pid. A malformed value gives an
// error wrapping ErrParse that names the file and quotes it.
func NetSysctls(procRoot string, pid int) (TCPSysctls, error) {
	dir := filepath.Join(procRoot, "sys", "net", "ipv4")
	if procRoot != "/proc" {
		ino, _ := NetNSOf(procRoot, pid)
		return readTCPSysctls(dir, ino, openSysctlFiles)
	}
	ino, err := NetNSOf(procRoot, pid)
	if err != nil {
		return TCPSysctls{}, err
	}
	return readTCPSysctls(dir, ino, func(paths []string) ([]*os.File, error) {
		return openInNetNS(NetNSPath(procRoot, pid), paths)
	})
}

// readTCPSysctls opens the files of sysctlFiles under dir with open (in
// the namespace of inode ino) and parses them.
func readTCPSysctls(dir string, ino uint64, open func(paths []string) ([]*os.File, error)) (TCPSysctls, error) {
	paths := make([]string, len(sysctlFiles), len(sysctlFiles)+1)
	for i, name := range sysctlFiles {
		paths[i] = filepath.Join(dir, name)
	}
	paths = append(paths, filepath.Join(dir, portRangeFile))
	files, err := open(paths)
	if err != nil {
		return TCPSysctls{}, err
	}
	var vals [len(sysctlFiles)]int
	var ports [2]int
	var errs []error
	for i, f := range files {
		// A sysctl file is one short line; 64 bytes hold any int's.
		buf := make([]byte, 64)
		n, rerr := f.Read(buf)
		f.Close()
		if rerr != nil {
			errs = append(errs, fmt.Errorf("netstat: read %s: %w", paths[i], rerr))
			continue
		}
		if i == len(sysctlFiles) {
			var perr error
			if ports[0], ports[1], perr = parsePortRange(buf[:n]); perr != nil {
				errs = append(errs, fmt.Errorf("netstat: %s: %w", paths[i], perr))
			}
			continue
		}
		v, perr := parseSysctlInt(buf[:n])
		if perr != nil {
			errs = append(errs, fmt.Errorf("netstat: %s: %w", paths[i], perr))
			continue
		}
		vals[i] = v
	}
	if err := errors.Join(errs...); err != nil {
		return TCPSysctls{}, err
	}
	return TCPSysctls{
		NetNS:           ino,
		FinTimeout:      time.Duration(vals[0]) * time.Second,
		KeepaliveTime:   time.Duration(vals[1]) * time.Second,
		KeepaliveIntvl:  time.Duration(vals[2]) * time.Second,
		KeepaliveProbes: vals[3],
		PortLow:         ports[0],
		PortHigh:        ports[1],
	}, nil
}

// parsePortRange parses ip_local_port_range: two ports separated by
// blanks ("32768\t60999\n"), the first not above the second. Anything else
// is an error wrapping ErrParse that quotes it.
func parsePortRange(b []byte) (lo, hi int, err error) {
	f := bytes.Fields(b)
	if len(f) == 2 {
		lo, err1 := strconv.Atoi(string(f[0]))
		hi, err2 := strconv.Atoi(string(f[1]))
		if err1 == nil && err2 == nil && lo > 0 && lo <= hi && hi <= 65535 {
			return lo, hi, nil
		}
	}
	q := bytes.TrimSpace(b)
	if len(q) > 32 {
		q = q[:32]
	}
	return 0, 0, fmt.Errorf("%w: %q is not a port range", ErrParse, q)
}

// openSysctlFiles opens paths in the caller's namespace; on an error it closes
// what it opened.
func openSysctlFiles(paths []string) ([]*os.File, error) {
	files := make([]*os.File, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("netstat: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// parseSysctlInt parses what a sysctl file of one integer holds: the
// number and a newline ("60\n"). Anything else (a vector of values, text,
// nothing) is an error wrapping ErrParse that quotes it.
func parseSysctlInt(b []byte) (int, error) {
	s := bytes.TrimSpace(b)
	v, err := strconv.Atoi(string(s))
	if err != nil || v < 0 {
		q := s
		if len(q) > 32 {
			q = q[:32]
		}
		return 0, fmt.Errorf("%w: %q is not a count of seconds or probes", ErrParse, q)
	}
	return v, nil
}

// SysctlCache reads each network namespace's TCPSysctls once (NetSysctls),
// by the namespace's inode: the processes of a namespace share them. A run
// (doctor's, watch's) keeps one for its life. It is safe for concurrent
// use.
type SysctlCache struct {
	procRoot string
	mu       sync.Mutex
	byNS     map[uint64]TCPSysctls
}

// NewSysctlCache returns an empty cache reading procRoot.
func NewSysctlCache(procRoot string) *SysctlCache {
	return &SysctlCache{procRoot: procRoot, byNS: map[uint64]TCPSysctls{}}
}

// NetSysctls returns the TCPSysctls of pid's network namespace, read once
// per namespace (errors are not cached: the next call tries again).
func (c *SysctlCache) NetSysctls(pid int) (TCPSysctls, error) {
	ino, err := NetNSOf(c.procRoot, pid)
	if err != nil && c.procRoot == "/proc" {
		return TCPSysctls{}, err
	}
	// A fixture tree's pids may have no namespace link (ino 0): read, not
	// cached.
	c.mu.Lock()
	v, ok := c.byNS[ino]
	c.mu.Unlock()
	if ok && ino != 0 {
		return v, nil
	}
	v, err = NetSysctls(c.procRoot, pid)
	if err != nil {
		return TCPSysctls{}, err
	}
	c.mu.Lock()
	c.byNS[ino] = v
	c.mu.Unlock()
	return v, nil
}
