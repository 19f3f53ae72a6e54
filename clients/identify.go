package clients

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kdiag/kdiag/netstat"
)

// Client is the Kafka client library a process runs, as far as the process
// shows it, and the evidence for it.
type Client struct {
	// Library is a catalog ID (KafkaClients, FranzGo, ...), "" when the
	// process showed none.
	Library string `json:"library"`
	// Version is exactly as the artifact or module names it: "3.9.0" for
	// kafka-clients-3.9.0.jar, "v1.22.3" for a Go module, "2.0.2" for
	// librdkafka; "" when unknown.
	Version  string `json:"version"`
	Language string `json:"language,omitempty"`
	// Binding is, for librdkafka, the program or package that loaded it
	// ("kcat", "confluent-kafka-python 1.7.0", "node-rdkafka 2.18.0").
	Binding string `json:"binding,omitempty"`
	// Evidence says what was read and what it showed, one statement each.
	Evidence []string `json:"evidence"`
	// Kdiag is set when the process is kdiag itself: the command it runs
	// and, for `kdiag produce` (Library KdiagProduce), the settings it
	// runs with. A kdiag broker or tool has Library "" and NotAClient.
	Kdiag *Kdiag `json:"kdiag,omitempty"`
}

// Identified reports whether a library was found.
func (c Client) Identified() bool { return c.Library != "" }

// Catalog returns the library's catalog entry, nil when not identified.
// For kdiag's reference producer it is the entry of the reader it runs
// with (Library.WithVariant).
func (c Client) Catalog() *Library {
	l, _ := Lookup(c.Library)
	if l != nil && c.Kdiag != nil && c.Kdiag.Producer != nil {
		return l.WithVariant(c.Kdiag.Producer.Reader)
	}
	return l
}

// String writes "franz-go v1.22.3", "librdkafka 2.0.2 (kcat)", "kdiag
// produce (reference producer, reader on-demand,
// connections.max.idle.ms=-1)", "kdiag broker (kdiag's Kafka broker, not a
// client)", or "client not identified".
func (c Client) String() string {
	if c.Kdiag != nil {
		return c.kdiagString()
	}
	if !c.Identified() {
		return "client not identified"
	}
	s := c.Library
	if c.Version != "" {
		s += " " + c.Version
	}
	if c.Binding != "" {
		s += " (" + c.Binding + ")"
	}
	return s
}

// proc reads one process's files under a proc root: /proc/<pid>/... for its
// own entries, and <procRoot>/<pid>/root/<path> for the files it names, so
// a process in a container is read in its own filesystem.
type proc struct {
	root string // <procRoot>/<pid>
	args []string
	env  map[string]string
	exe  string // the exe link's target, as the process sees it
	comm string
}

func openProc(procRoot string, pid int) (*proc, error) {
	p := &proc{root: filepath.Join(procRoot, strconv.Itoa(pid))}
	cl, err := os.ReadFile(filepath.Join(p.root, "cmdline"))
	if err != nil {
		return nil, err
	}
	p.args = splitNUL(cl)
	if env, err := os.ReadFile(filepath.Join(p.root, "environ")); err == nil {
		p.env = parseEnviron(env)
	}
	p.exe, _ = os.Readlink(filepath.Join(p.root, "exe"))
	p.exe = strings.TrimSuffix(p.exe, " (deleted)")
	if c, err := os.ReadFile(filepath.Join(p.root, "comm")); err == nil {
		p.comm = strings.TrimSpace(string(c))
	}
	return p, nil
}

// file returns where to read a path the process names: absolute paths
// under its root, relative ones under its working directory.
func (p *proc) file(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Join(p.root, "root", name)
	}
	return filepath.Join(p.root, "cwd", name)
}

// abs returns a path the process names as an absolute path in its own
// filesystem (relative ones joined to its working directory).
func (p *proc) abs(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Clean(name)
	}
	cwd, err := p.cwd()
	if err != nil {
		return name
	}
	return filepath.Join(cwd, name)
}

// cwd returns the working directory as a path in the process's own
// filesystem: the cwd link's target with the root link's target cut off
// (the root of a host process is /; a fixture's is a directory).
func (p *proc) cwd() (string, error) {
	cwd, err := os.Readlink(filepath.Join(p.root, "cwd"))
	if err != nil {
		return "", err
	}
	if root, err := os.Readlink(filepath.Join(p.root, "root")); err == nil && root != "/" {
		if rel, err := filepath.Rel(root, cwd); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join("/", rel), nil
		}
	}
	return cwd, nil
}

func splitNUL(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// parseEnviron reads /proc/<pid>/environ: NUL-separated NAME=value.
func parseEnviron(b []byte) map[string]string {
	m := map[string]string{}
	for _, kv := range splitNUL(b) {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// Identify tells which Kafka client library process pid runs, reading under
// procRoot: the Go build info of its executable, a JVM's kafka-clients jar,
// librdkafka in its maps, the imports of a Python or Node main script. A
// process that shows none is Client{} with the evidence of what was looked
// at. An error matching fs.ErrNotExist means the process is gone.
func Identify(procRoot string, pid int) (Client, error) {
	p, err := openProc(procRoot, pid)
	if err != nil {
		return Client{}, fmt.Errorf("process %d: %w", pid, err)
	}
	var looked []string
	if c, ok, note := p.goClient(); ok {
		return c, nil
	} else if note != "" {
		looked = append(looked, note)
	}
	if p.isJVM() {
		if c, ok := p.javaClient(); ok {
			return c, nil
		}
		looked = append(looked, "a JVM without a kafka-clients jar on its class path or open")
	}
	if c, ok := p.librdkafkaClient(); ok {
		return c, nil
	}
	looked = append(looked, "no librdkafka in /proc/"+filepath.Base(p.root)+"/maps")
	switch {
	case isPython(p.exeName()):
		if c, ok, note := p.pythonClient(); ok {
			return c, nil
		} else {
			looked = append(looked, note)
		}
	case isNode(p.exeName()):
		if c, ok, note := p.nodeClient(); ok {
			return c, nil
		} else {
			looked = append(looked, note)
		}
	}
	return Client{Evidence: append([]string{"client not identified"}, looked...)}, nil
}

// exeName is the base name of the executable, from the exe link, else the
// first argument.
func (p *proc) exeName() string {
	if p.exe != "" {
		return path.Base(p.exe)
	}
	if len(p.args) > 0 {
		return path.Base(p.args[0])
	}
	return p.comm
}

// Go module paths of Kafka clients, in the order one is named when a binary
// links several.
var goModules = []struct {
	path, lib string
}{
	{"github.com/twmb/franz-go", FranzGo},
	{"github.com/IBM/sarama", Sarama},
	{"github.com/Shopify/sarama", Sarama},
	{"github.com/segmentio/kafka-go", KafkaGo},
	{"github.com/confluentinc/confluent-kafka-go/v2", ConfluentKafkaGo},
	{"github.com/confluentinc/confluent-kafka-go", ConfluentKafkaGo},
}

// goClient reads the Go build info of the executable (debug/buildinfo: the
// module list the linker embeds, runtime/debug.BuildInfo). The note says
// what was seen when no client module is there.
func (p *proc) goClient() (Client, bool, string) {
	exe := filepath.Join(p.root, "exe")
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		return Client{}, false, "" // not a Go binary (or unreadable): nothing to say
	}
	if c, ok := p.kdiagClient(bi); ok {
		return c, true, ""
	}
	deps := make(map[string]string, len(bi.Deps))
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil && d.Replace.Version != "" {
			v = d.Replace.Version
		}
		deps[d.Path] = v
	}
	c, ok := goClientFromDeps(deps)
	if !ok {
		return Client{}, false, fmt.Sprintf("a Go binary (%s) whose build info names no Kafka client module", bi.GoVersion)
	}
	c.Evidence = slices.Insert(c.Evidence, 0, fmt.Sprintf("Go build info of /proc/%s/exe (%s, %s)", filepath.Base(p.root), p.exe, bi.GoVersion))
	if c.Library == ConfluentKafkaGo {
		if v, where, err := rdkafkaVersionOf(exe); err == nil {
			c.Evidence = append(c.Evidence, fmt.Sprintf("librdkafka %s linked in (%s)", v, where))
		}
	}
	return c, true, ""
}

// goClientFromDeps picks the Kafka client among a binary's module deps
// (path -> version).
func goClientFromDeps(deps map[string]string) (Client, bool) {
	var c Client
	for _, m := range goModules {
		v, ok := deps[m.path]
		if !ok {
			continue
		}
		if c.Library == "" {
			c = Client{Library: m.lib, Version: v, Language: "Go"}
			c.Evidence = append(c.Evidence, "module "+m.path+" "+v)
			continue
		}
		if m.lib != c.Library {
			c.Evidence = append(c.Evidence, "also links "+m.path+" "+v)
		}
	}
	return c, c.Library != ""
}

func (p *proc) isJVM() bool {
	return p.comm == "java" || p.exeName() == "java" || (len(p.args) > 0 && path.Base(p.args[0]) == "java")
}

// javaClient finds the kafka-clients jar of a JVM: named on the class path
// (-cp, -classpath, --class-path, -Djava.class.path, CLASSPATH; a dir/*
// entry is listed), the jar of -jar (a Spring Boot fat jar holds
// BOOT-INF/lib/kafka-clients-X.jar), or open (a JVM keeps its class path
// jars open).
func (p *proc) javaClient() (Client, bool) {
	pid := filepath.Base(p.root)
	var cands []jarRef
	for _, cp := range classPaths(p.args, p.env) {
		for _, el := range filepath.SplitList(cp.value) {
			if strings.HasSuffix(el, "*") {
				dir := strings.TrimSuffix(strings.TrimSuffix(el, "*"), "/")
				names, _ := readDirNames(p.file(dir))
				for _, n := range names {
					if strings.HasSuffix(n, ".jar") {
						cands = append(cands, jarRef{path: filepath.Join(dir, n), how: cp.how + " " + el})
					}
				}
				continue
			}
			cands = append(cands, jarRef{path: el, how: cp.how})
		}
	}
	if j := jarArg(p.args); j != "" {
		cands = append(cands, jarRef{path: j, how: "-jar"})
	}
	for _, t := range openJars(p.root) {
		cands = append(cands, jarRef{path: t, how: "open in /proc/" + pid + "/fd"})
	}
	// A kafka-clients jar by name first; then fat or shaded jars.
	for _, j := range cands {
		if v, ok := kafkaClientsJarVersion(path.Base(j.path)); ok {
			c := Client{Library: KafkaClients, Version: v, Language: "Java"}
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s (%s)", j.path, j.how))
			if v == "" {
				if jv, err := jarKafkaVersion(p.file(j.path)); err == nil {
					c.Version = jv
					c.Evidence = append(c.Evidence, "version "+jv+" from its kafka/kafka-version.properties")
				}
			}
			return c, true
		}
	}
	seen := map[string]bool{}
	for _, j := range cands {
		if seen[j.path] || !strings.HasSuffix(j.path, ".jar") {
			continue
		}
		seen[j.path] = true
		inner, v, err := fatJarKafkaClients(p.file(j.path))
		if err != nil || inner == "" {
			continue
		}
		c := Client{Library: KafkaClients, Version: v, Language: "Java"}
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s inside %s (%s)", inner, j.path, j.how))
		return c, true
	}
	return Client{}, false
}

type jarRef struct{ path, how string }

type classPath struct{ value, how string }

// classPaths returns the class path values of a java command line and its
// CLASSPATH, each with where it came from.
func classPaths(args []string, env map[string]string) []classPath {
	var out []classPath
	for i, a := range args {
		switch {
		case (a == "-cp" || a == "-classpath" || a == "--class-path") && i+1 < len(args):
			out = append(out, classPath{args[i+1], "class path " + a})
		case strings.HasPrefix(a, "--class-path="):
			out = append(out, classPath{strings.TrimPrefix(a, "--class-path="), "class path --class-path"})
		case strings.HasPrefix(a, "-Djava.class.path="):
			out = append(out, classPath{strings.TrimPrefix(a, "-Djava.class.path="), "class path -Djava.class.path"})
		case a == "-jar":
			// The jar's own manifest is the class path from here on.
			return out
		}
	}
	if cp, ok := env["CLASSPATH"]; ok && cp != "" {
		out = append(out, classPath{cp, "CLASSPATH"})
	}
	return out
}

// jarArg returns the jar of `java ... -jar app.jar`, "" if none.
func jarArg(args []string) string {
	for i, a := range args {
		if a == "-jar" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// kafkaClientsJarVersion reads the version from a kafka-clients jar's name:
// kafka-clients-3.9.0.jar is 3.9.0, Confluent Platform's
// kafka-clients-7.7.0-ccs.jar is 7.7.0-ccs, kafka-clients.jar is "" (ok:
// a kafka-clients jar without a version in its name).
func kafkaClientsJarVersion(base string) (string, bool) {
	if !strings.HasPrefix(base, "kafka-clients") || !strings.HasSuffix(base, ".jar") {
		return "", false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(base, "kafka-clients"), ".jar")
	if rest == "" {
		return "", true
	}
	if rest[0] != '-' || len(rest) < 2 || rest[1] < '0' || rest[1] > '9' {
		return "", false // kafka-clients-test-utils.jar and the like
	}
	return rest[1:], true
}

// openJars returns the targets of the process's fds that are jars.
func openJars(root string) []string {
	dir := filepath.Join(root, "fd")
	names, err := readDirNames(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		t, err := os.Readlink(filepath.Join(dir, n))
		if err == nil && strings.HasSuffix(t, ".jar") && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// librdkafkaClient finds librdkafka in the process's maps, reads its
// version, and names the binding that loaded it.
func (p *proc) librdkafkaClient() (Client, bool) {
	f, err := os.Open(filepath.Join(p.root, "maps"))
	if err != nil {
		return Client{}, false
	}
	m, err := parseMaps(f)
	f.Close()
	if err != nil || m.librdkafka == "" {
		return Client{}, false
	}
	pid := filepath.Base(p.root)
	c := Client{Library: Librdkafka, Language: "C"}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s mapped (/proc/%s/maps)", m.librdkafka, pid))
	if v, where, err := rdkafkaVersionOf(p.file(m.librdkafka)); err == nil {
		c.Version = v
		c.Evidence = append(c.Evidence, fmt.Sprintf("version %s from its %s", v, where))
	} else {
		c.Evidence = append(c.Evidence, "version unknown: "+err.Error())
	}
	switch exe := p.exeName(); {
	case exe == "kcat" || exe == "kafkacat":
		c.Binding = exe
	case m.confluentPython != "":
		c.Binding = "confluent-kafka-python"
		c.Language = "Python"
		if v, meta := p.pythonDistVersion(path.Dir(path.Dir(m.confluentPython)), "confluent_kafka"); v != "" {
			c.Binding += " " + v
			c.Evidence = append(c.Evidence, fmt.Sprintf("loaded by %s (%s)", m.confluentPython, meta))
		} else {
			c.Evidence = append(c.Evidence, "loaded by "+m.confluentPython)
		}
	case m.nodeRdkafka != "":
		c.Binding = "node-rdkafka"
		c.Language = "JavaScript"
		if v, pj := p.nodePackageVersion(m.nodeRdkafka, "node-rdkafka"); v != "" {
			c.Binding += " " + v
			c.Evidence = append(c.Evidence, fmt.Sprintf("loaded by %s (%s)", m.nodeRdkafka, pj))
		} else {
			c.Evidence = append(c.Evidence, "loaded by "+m.nodeRdkafka)
		}
	default:
		c.Evidence = append(c.Evidence, "loaded by "+p.exeName())
	}
	return c, true
}

// isPython matches python, python3, python3.11 (and pypy3).
func isPython(exe string) bool {
	for _, pre := range []string{"python", "pypy"} {
		if rest, ok := strings.CutPrefix(exe, pre); ok && strings.Trim(rest, "0123456789.") == "" {
			return true
		}
	}
	return false
}

func isNode(exe string) bool { return exe == "node" || exe == "nodejs" }

// FromProcess identifies the client from what a scan recorded of a process
// (netstat.Process.Kafka: the kafka-clients jar on the class path or open,
// librdkafka mapped), for a process that is no longer there to read: a
// recording replayed by kdiag report. It finds less than Identify: no Go
// module, no versions of librdkafka.
func FromProcess(p netstat.Process) Client {
	k := p.Kafka
	open, rest, ok := strings.Cut(k, " (")
	jar := strings.TrimSuffix(rest, ")")
	switch {
	case !ok:
	case open == "kafka-clients on class path" || open == "kafka-clients jar open":
		if v, isJar := kafkaClientsJarVersion(jar); isJar {
			return Client{Library: KafkaClients, Version: v, Language: "Java", Evidence: []string{k + ", as scanned"}}
		}
	case open == "maps librdkafka":
		return Client{Library: Librdkafka, Language: "C", Evidence: []string{k + ", as scanned"}}
	}
	return Client{}
}

// Identifier returns an analyzer.Options.Identify for the processes under
// procRoot: Identify on the live process, and when it is gone or cannot
// be read, FromProcess on what the scan recorded.
func Identifier(procRoot string) func(netstat.Process) Client {
	return func(p netstat.Process) Client {
		c, err := Identify(procRoot, p.PID)
		if err != nil {
			return FromProcess(p)
		}
		if !c.Identified() {
			if r := FromProcess(p); r.Identified() {
				return r
			}
		}
		return c
	}
}
