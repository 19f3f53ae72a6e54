package clients

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/producer"
)

// kdiag itself: its binary links franz-go (the wire protocol of its
// producer and broker), so its build info alone would name it a franz-go
// client. Identify tells it by its main package and reads what it runs
// from its command line.

// KdiagMain is the main package of kdiag's binary, as its Go build info
// names it (runtime/debug.BuildInfo.Path).
const KdiagMain = "github.com/kdiag/kdiag/cmd/kdiag"

// Roles of a kdiag process toward Kafka (Kdiag.Role).
const (
	// RoleProducer: `kdiag produce`, the reference producer, a Kafka
	// client (catalog entry KdiagProduce).
	RoleProducer = "producer"
	// RoleBroker: `kdiag broker`, and `kdiag repro` with its embedded
	// cluster: Kafka brokers, not clients.
	RoleBroker = "broker"
	// RoleTool: every other command (scan, watch, doctor, ...): not a
	// Kafka client.
	RoleTool = "tool"
)

// Kdiag is what Identify read of a kdiag process.
type Kdiag struct {
	// Command is the subcommand it runs ("produce", "broker", "repro",
	// "scan", ...), "" when its command line names none.
	Command string `json:"command"`
	Role    string `json:"role"`
	// Producer is the reference producer's settings (Command produce).
	Producer *ReferenceProducer `json:"producer,omitempty"`
	// BrokerIdleMS is, for `kdiag broker`, the idle timeout it closes
	// connections after (--idle, the broker's connections.max.idle.ms), 0
	// for never; nil for the other commands.
	BrokerIdleMS *int64 `json:"broker_idle_ms,omitempty"`
	// StartedBy names the kdiag process that started this one: "kdiag
	// repro (pid 41)" for repro's producer, "" otherwise.
	StartedBy string `json:"started_by,omitempty"`
}

// ReferenceProducer is what `kdiag produce` runs with, read from its
// command line and --config file over the defaults of package producer,
// in the order `kdiag produce` applies them (the file, then --set, then
// --reader and --callback-delay).
type ReferenceProducer struct {
	// Reader is kdiag.reader: "poll" (reads every connection, as Java)
	// or "on-demand" (reads only while a response is pending, as Sarama,
	// franz-go and kafka-go); ReaderFrom says where it was set.
	Reader     string `json:"reader"`
	ReaderFrom string `json:"reader_from"`
	// ConnectionsMaxIdleMS is connections.max.idle.ms (negative: never
	// closed by the client); IdleFrom says where it was set.
	ConnectionsMaxIdleMS int64  `json:"connections_max_idle_ms"`
	IdleFrom             string `json:"connections_max_idle_ms_from"`
	// BlockCallbacks is --block-callbacks: every send callback blocks the
	// network goroutine until the process gets SIGUSR1.
	BlockCallbacks bool `json:"block_callbacks"`
	// CallbackDelayMS is kdiag.callback.delay.ms (--callback-delay): each
	// send callback sleeps that long on the network goroutine first.
	CallbackDelayMS int64 `json:"callback_delay_ms"`
	// ProducerPerMessage is --producer-per-message: a new producer for
	// every message, never closed.
	ProducerPerMessage bool `json:"producer_per_message"`
	// Config is --config as given, "" for none.
	Config string `json:"config,omitempty"`
}

// CallbacksBlock reports whether its callbacks stall the network
// goroutine (--block-callbacks or a callback delay): the stand-in for a
// Java send callback that blocks the network thread.
func (r *ReferenceProducer) CallbacksBlock() bool {
	return r.BlockCallbacks || r.CallbackDelayMS > 0
}

// IsKdiag reports whether the process is kdiag itself.
func (c Client) IsKdiag() bool { return c.Kdiag != nil }

// NotAClient reports whether the process is known not to be a Kafka
// client: kdiag's broker (a Kafka broker) or one of its other commands.
// Doctor should neither diagnose it as a client nor call it unidentified.
func (c Client) NotAClient() bool { return c.Kdiag != nil && c.Kdiag.Role != RoleProducer }

// kdiagString is Client.String for kdiag: "kdiag produce (reference
// producer, reader on-demand, connections.max.idle.ms=-1)", "kdiag broker
// (kdiag's Kafka broker, not a client)".
func (c Client) kdiagString() string {
	k := c.Kdiag
	s := "kdiag"
	if k.Command != "" {
		s += " " + k.Command
	}
	if c.Version != "" && c.Version != "(devel)" {
		s += " " + c.Version
	}
	switch {
	case k.Producer != nil:
		r := k.Producer
		s += fmt.Sprintf(" (reference producer, reader %s, connections.max.idle.ms=%d", r.Reader, r.ConnectionsMaxIdleMS)
		if r.BlockCallbacks {
			s += ", callbacks blocked until SIGUSR1"
		} else if r.CallbackDelayMS > 0 {
			s += fmt.Sprintf(", callbacks sleep %d ms", r.CallbackDelayMS)
		}
		s += ")"
	case k.Role == RoleBroker:
		s += " (kdiag's Kafka broker, not a client)"
	default:
		s += " (not a Kafka client)"
	}
	return s
}

// kdiagClient identifies a kdiag process from its build info and command
// line; ok is false when the executable is not kdiag's.
func (p *proc) kdiagClient(bi *buildinfo.BuildInfo) (Client, bool) {
	if bi.Path != KdiagMain {
		return Client{}, false
	}
	pid := filepath.Base(p.root)
	version := kdiagVersion(bi)
	c := Client{Version: version, Language: "Go"}
	ev := fmt.Sprintf("Go build info of /proc/%s/exe (%s, %s): main package %s, module %s %s", pid, p.exe, bi.GoVersion, bi.Path, bi.Main.Path, version)
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			ev += ", commit " + s.Value[:12]
		}
	}
	c.Evidence = append(c.Evidence, ev)
	cmd, rest := kdiagCommand(p.args)
	k := &Kdiag{Command: cmd, Role: RoleTool}
	c.Kdiag = k
	switch cmd {
	case "produce":
		k.Role = RoleProducer
		c.Library = KdiagProduce
		k.Producer, c.Evidence = p.referenceProducer(rest, c.Evidence)
		if parent := p.kdiagParent(); parent != "" {
			k.StartedBy = parent
			c.Evidence = append(c.Evidence, "started by "+parent)
		}
	case "broker":
		k.Role = RoleBroker
		idle, from := brokerDefaultIdle, "the default --idle"
		if f, ok := lastFlag(parseFlags(rest, brokerValueFlags), "idle"); ok {
			if d, err := time.ParseDuration(f.value); err == nil {
				idle, from = d, "--idle "+f.value
			}
		}
		ms := idle.Milliseconds()
		k.BrokerIdleMS = &ms
		c.Evidence = append(c.Evidence, fmt.Sprintf("command kdiag broker: kdiag's embedded Kafka broker, not a client; closes connections idle for %d ms (%s)", ms, from))
	case "repro":
		if _, ok := lastFlag(parseFlags(rest, reproValueFlags), "bootstrap-server"); ok {
			c.Evidence = append(c.Evidence, "command kdiag repro --bootstrap-server: runs scenarios against a real cluster; its producers are child processes (kdiag produce): not a Kafka client itself")
		} else {
			k.Role = RoleBroker
			c.Evidence = append(c.Evidence, "command kdiag repro: runs kdiag's embedded Kafka brokers in this process and its producers as child processes (kdiag produce): not a Kafka client itself")
		}
	case "":
		c.Evidence = append(c.Evidence, "no kdiag command on its command line: not a Kafka client")
	default:
		c.Evidence = append(c.Evidence, "command kdiag "+cmd+": not a Kafka client")
	}
	return c, true
}

// ldflagsVersion finds the version set with -ldflags -X (see
// internal/cmd/version), which the build info records among its settings.
var ldflagsVersion = regexp.MustCompile(`internal/cmd/version\.Version=([^\s'"]+)`)

// kdiagVersion is the version kdiag prints: the -ldflags one, else the
// main module's ("(devel)" for a build from a work tree).
func kdiagVersion(bi *buildinfo.BuildInfo) string {
	for _, s := range bi.Settings {
		if s.Key == "-ldflags" {
			if m := ldflagsVersion.FindStringSubmatch(s.Value); m != nil {
				return m[1]
			}
		}
	}
	return bi.Main.Version
}

// kdiagCommands are kdiag's subcommands (internal/cmd/root), and cobra's.
var kdiagCommands = []string{"version", "scan", "broker", "lint", "rules", "produce", "watch", "report", "repro", "doctor", "help", "completion"}

// kdiagCommand returns the subcommand of a kdiag command line and the
// arguments after it. Before the subcommand only the root's flags can
// come (--proc-root, which takes a value).
func kdiagCommand(args []string) (string, []string) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--proc-root":
			i++
			continue
		case strings.HasPrefix(a, "-"):
			continue
		}
		for _, c := range kdiagCommands {
			if a == c {
				return a, args[i+1:]
			}
		}
		return "", nil
	}
	return "", nil
}

// flagArg is one flag of a command line: --name value or --name=value (a
// bool flag given bare has value "true").
type flagArg struct{ name, value string }

// Flags that take a value, per command (the others are bools): what
// pflag needs to know to tell a flag's value from the next argument.
// TestKdiagValueFlags checks them against the commands' own flags.
var (
	produceValueFlags = []string{"config", "bootstrap-server", "set", "topic", "messages", "interval", "reader", "callback-delay", "duration", "log-level", "log-format", "model", "proc-root"}
	brokerValueFlags  = []string{"brokers", "ports", "listen", "advertise", "idle", "topic", "partitions", "max-request-bytes", "max-queued-request-bytes", "retention-bytes", "log-level", "duration", "proc-root"}
	reproValueFlags   = []string{"bootstrap-server", "broker-idle", "scale", "duration", "sample-interval", "topic", "output", "o", "proc-root",
		"brokers", "bootstrap-env", "max-hold", "connect-timeout", "broker-closes", "report"}
)

// brokerDefaultIdle is `kdiag broker --idle`'s default (10m: the real
// broker's connections.max.idle.ms); TestKdiagValueFlags checks it.
const brokerDefaultIdle = 10 * time.Minute

// parseFlags reads the flags of a subcommand's arguments as pflag does
// (--name=value, --name value for the flags in valued, -x shorthands
// skipped), up to "--".
func parseFlags(args []string, valued []string) []flagArg {
	var out []flagArg
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			// A shorthand (-v) or a positional argument.
			if len(a) == 2 && a[0] == '-' && containsString(valued, a[1:]) {
				i++
			}
			continue
		}
		name, value, hasValue := strings.Cut(name, "=")
		if !hasValue {
			if containsString(valued, name) {
				if i+1 < len(args) {
					value = args[i+1]
					i++
				}
			} else {
				value = "true"
			}
		}
		out = append(out, flagArg{name, value})
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// lastFlag returns the last value given for a flag (pflag keeps the last
// of a repeated scalar flag).
func lastFlag(fs []flagArg, name string) (flagArg, bool) {
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].name == name {
			return fs[i], true
		}
	}
	return flagArg{}, false
}

// referenceProducer reads what `kdiag produce` runs with from its
// arguments (after "produce") and its --config file, read in the process's
// own filesystem, and says where each setting came from in the evidence.
// It builds the settings as `kdiag produce` does (internal/cmd/produce:
// ProduceOptions.config): the file, --set on top, then --reader and
// --callback-delay.
func (p *proc) referenceProducer(args []string, ev []string) (*ReferenceProducer, []string) {
	fs := parseFlags(args, produceValueFlags)
	r := &ReferenceProducer{}
	over := map[string]string{}
	for _, f := range fs {
		switch f.name {
		case "set":
			if k, v, ok := strings.Cut(f.value, "="); ok {
				over[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		case "config":
			r.Config = f.value
		case "block-callbacks":
			r.BlockCallbacks, _ = strconv.ParseBool(f.value)
		case "producer-per-message":
			r.ProducerPerMessage, _ = strconv.ParseBool(f.value)
		}
	}
	reader, readerSet := lastFlag(fs, "reader")
	if readerSet {
		over[producer.KeyReader] = reader.value
	}
	delay, delaySet := lastFlag(fs, "callback-delay")
	if delaySet {
		if d, err := time.ParseDuration(delay.value); err == nil {
			over[producer.KeyCallbackDelay] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	// Where each key came from, for the evidence: the last of flags, --set
	// and the file that set it.
	from := func(key string) string {
		switch {
		case key == producer.KeyReader && readerSet:
			return "--reader " + reader.value
		case key == producer.KeyCallbackDelay && delaySet:
			return "--callback-delay " + delay.value
		}
		if v, ok := over[key]; ok {
			return "--set " + key + "=" + v
		}
		if r.Config != "" && p.configHas(r.Config, key) {
			return "--config " + r.Config
		}
		return "the default"
	}
	cfg, err := producer.LoadConfigWith(p.configPath(r.Config), over)
	if err != nil && r.Config != "" {
		ev = append(ev, fmt.Sprintf("--config %s could not be read now (%v): the settings below leave it out", r.Config, err))
		cfg, err = producer.LoadConfigWith("", over)
	}
	if err != nil {
		// kdiag produce refuses such settings at start, so this process
		// was started with others: say so, and give the defaults.
		ev = append(ev, fmt.Sprintf("its settings do not parse now (%v): the defaults below", err))
		cfg = producer.DefaultConfig()
	}
	r.Reader = cfg.Reader.String()
	r.ReaderFrom = from(producer.KeyReader)
	r.ConnectionsMaxIdleMS = cfg.ConnectionsMaxIdle.Milliseconds()
	r.IdleFrom = from("connections.max.idle.ms")
	r.CallbackDelayMS = cfg.CallbackDelay.Milliseconds()
	ev = append(ev, "command kdiag produce: kdiag's reference producer",
		fmt.Sprintf("reader %s (%s)", r.Reader, r.ReaderFrom),
		fmt.Sprintf("connections.max.idle.ms %d (%s)", r.ConnectionsMaxIdleMS, r.IdleFrom))
	switch {
	case r.BlockCallbacks:
		ev = append(ev, "send callbacks block the network goroutine until SIGUSR1 (--block-callbacks)")
	case r.CallbackDelayMS > 0:
		ev = append(ev, fmt.Sprintf("send callbacks sleep %d ms on the network goroutine (%s)", r.CallbackDelayMS, from(producer.KeyCallbackDelay)))
	}
	if r.ProducerPerMessage {
		ev = append(ev, "a new producer for every message, never closed (--producer-per-message)")
	}
	return r, ev
}

// configPath is where to read the process's --config file, "" for none.
func (p *proc) configPath(name string) string {
	if name == "" {
		return ""
	}
	return p.file(name)
}

// configHas reports whether the process's --config file sets key.
func (p *proc) configHas(name, key string) bool {
	f, err := os.Open(p.file(name))
	if err != nil {
		return false
	}
	defer f.Close()
	file, err := config.ParseProperties(name, f)
	if err != nil {
		return false
	}
	_, ok := file.Effective()[key]
	return ok
}

// kdiagParent names the kdiag command that started the process ("kdiag
// repro (pid 41)"), "" when its parent is not kdiag.
func (p *proc) kdiagParent() string {
	st, err := os.ReadFile(filepath.Join(p.root, "stat"))
	if err != nil {
		return ""
	}
	ppid, err := parseStatPPID(st)
	if err != nil || ppid <= 0 {
		return ""
	}
	parent, err := openProc(filepath.Dir(p.root), ppid)
	if err != nil {
		return ""
	}
	bi, err := buildinfo.ReadFile(filepath.Join(parent.root, "exe"))
	if err != nil || bi.Path != KdiagMain {
		return ""
	}
	cmd, _ := kdiagCommand(parent.args)
	return fmt.Sprintf("kdiag %s (pid %d)", cmd, ppid)
}

// parseStatPPID returns the parent pid of a /proc/<pid>/stat line: the
// second field after the command name (proc(5)).
func parseStatPPID(b []byte) (int, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("stat %q: no parent pid", s)
	}
	return strconv.Atoi(f[1])
}

// selfMeasured is how kdiag produce's catalog rows are measured.
const selfMeasured = "TestKdiagSelf (clients/kdiag_test.go), at every run; the test closes the idle connections (Cluster.CloseIdle)"
