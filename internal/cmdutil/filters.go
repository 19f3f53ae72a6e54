package cmdutil

import (
	"regexp"
	"slices"
	"strings"

	"github.com/kdiag/kdiag/netstat"
	"github.com/spf13/pflag"
)

// Filters are the socket filter flags shared by the commands that scan
// (`kdiag watch`; the same flags, names and messages as `kdiag scan`):
// --state --pid --process --port --remote --brokers --listen-ports
// --by-client --source --fds.
type Filters struct {
	States  string
	PIDs    []int
	Process string
	Ports   []int
	Remotes []string
	Brokers string
	Source  string
	FDs     string
	// ListenPorts and ByClient ask for a broker host's view: the sockets
	// of these local ports (or, with ByClient alone, of the ports the
	// --pid/--process processes listen on) by client address.
	ListenPorts []int
	ByClient    bool
	// StatesGiven says --state was given (the command sets it from its
	// flags): the broker host's view has its own default.
	StatesGiven bool
}

// ClientView reports whether the filters ask for a broker host's view
// (--listen-ports or --by-client).
func (f *Filters) ClientView() bool { return f.ByClient || len(f.ListenPorts) > 0 }

// ClientViewStates are the states of a broker host's view when --state is
// not given: every state but CLOSE. A held CLOSE socket has no address
// unless a repeated scan saw it connected, so no client to be counted
// under; leaving CLOSE out also lets the kernel filter the dump by local
// port (netstat.Query.ListenPorts). kdiag scan says in a note how many held
// CLOSE sockets of the broker's processes it left out.
const ClientViewStates = netstat.AllStates &^ (1 << netstat.Close)

// AddFilterFlags registers the filter flags on fs, writing into f.
func AddFilterFlags(fs *pflag.FlagSet, f *Filters) {
	fs.StringVar(&f.States, "state", "all", "comma list of TCP states ("+strings.Join(netstat.StateFlagNames(), ", ")+"), or all")
	fs.IntSliceVar(&f.PIDs, "pid", nil, "only these processes (repeatable, or a comma list)")
	fs.StringVar(&f.Process, "process", "", "only processes whose name or command line matches this regular expression")
	fs.IntSliceVar(&f.Ports, "port", nil, "only sockets to this remote port, and the held CLOSE sockets of their processes (repeatable, or a comma list)")
	fs.StringSliceVar(&f.Remotes, "remote", nil, "only sockets to HOST[:PORT], and the held CLOSE sockets of their processes (repeatable)")
	fs.IntSliceVar(&f.ListenPorts, "listen-ports", nil, "a broker host's view: only sockets whose local port is one of these (the broker's side of its clients' connections, and its listeners), by client address (repeatable, or a comma list)")
	fs.BoolVar(&f.ByClient, "by-client", false, "a broker host's view, of the ports the --process or --pid processes listen on (or of --listen-ports): connections by client address")
	fs.StringVar(&f.Brokers, "brokers", "", "Kafka bootstrap list host:port,...: only sockets to those brokers and the held CLOSE sockets of their processes (or of Kafka clients), their processes marked as Kafka clients")
	fs.StringVar(&f.Source, "source", netstat.SourceAuto, "socket source: "+strings.Join(netstat.SourceNames, "|")+" (auto: netlink, else /proc/net/tcp)")
	fs.StringVar(&f.FDs, "fds", netstat.FDsAuto, "where the processes' socket fds are read: "+strings.Join(netstat.FDSourceNames, "|")+" (auto: the kernel's socket fd iterator as root on Linux 5.11 or later with BTF, else /proc/<pid>/fd)")
}

// Query checks the flags and builds the query; every error is the user's to
// fix, so it is a usage error (exit 2).
func (f *Filters) Query() (netstat.Query, error) {
	states, err := netstat.ParseStateSet(f.States)
	if err != nil {
		return netstat.Query{}, UsageErrorf("--state: %v", err)
	}
	q := netstat.Query{States: states}
	for _, p := range f.PIDs {
		if p <= 0 {
			return netstat.Query{}, UsageErrorf("--pid %d: a pid is a positive number", p)
		}
	}
	q.PIDs = f.PIDs
	if f.Process != "" {
		re, err := regexp.Compile(f.Process)
		if err != nil {
			return netstat.Query{}, UsageErrorf("--process %q: %v", f.Process, err)
		}
		q.Process = re
	}
	for _, p := range f.Ports {
		if p < 1 || p > 65535 {
			return netstat.Query{}, UsageErrorf("--port %d: a port is a number from 1 to 65535", p)
		}
		q.RemotePorts = append(q.RemotePorts, uint16(p))
	}
	for _, r := range f.Remotes {
		e, err := netstat.ParseEndpoint(r)
		if err != nil {
			return netstat.Query{}, UsageErrorf("--remote: %v", err)
		}
		q.Remotes = append(q.Remotes, e)
	}
	if err := f.clientView(&q); err != nil {
		return netstat.Query{}, err
	}
	if f.Brokers != "" {
		b, err := netstat.ParseBrokers(f.Brokers)
		if err != nil {
			return netstat.Query{}, UsageErrorf("--brokers: %v", err)
		}
		q.Brokers = b
	}
	if err := f.checkSource(); err != nil {
		return netstat.Query{}, err
	}
	if f.FDs == "" {
		f.FDs = netstat.FDsAuto
	}
	if !slices.Contains(netstat.FDSourceNames, f.FDs) {
		return netstat.Query{}, UsageErrorf("--fds %q: want one of %s", f.FDs, strings.Join(netstat.FDSourceNames, ", "))
	}
	return q, nil
}

// clientView checks --listen-ports and --by-client and puts them in q: the
// ports, and the view's states when --state was not given.
func (f *Filters) clientView(q *netstat.Query) error {
	for _, p := range f.ListenPorts {
		if p < 1 || p > 65535 {
			return UsageErrorf("--listen-ports %d: a port is a number from 1 to 65535", p)
		}
		q.ListenPorts = append(q.ListenPorts, uint16(p))
	}
	if !f.ClientView() {
		return nil
	}
	selects := len(f.PIDs) > 0 || f.Process != ""
	switch {
	case len(f.ListenPorts) > 0 && selects:
		// The view counts the broker's side of each connection, held by
		// no process once the broker closed it (FIN_WAIT2, TIME_WAIT):
		// restricting the holders would drop those.
		return UsageErrorf("--listen-ports with --pid or --process: give one; --by-client --process NAME takes the ports NAME listens on")
	case len(f.ListenPorts) == 0 && !selects:
		return UsageErrorf("--by-client needs the broker's ports: --listen-ports 9092, or --process/--pid to take the ports those processes listen on")
	}
	if !f.StatesGiven {
		q.States = ClientViewStates
	}
	return nil
}

func (f *Filters) checkSource() error {
	if f.Source == "" {
		f.Source = netstat.SourceAuto
	}
	for _, s := range netstat.SourceNames {
		if s == f.Source {
			return nil
		}
	}
	return UsageErrorf("--source %q: want one of %s", f.Source, strings.Join(netstat.SourceNames, ", "))
}
