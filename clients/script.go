package clients

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// maxScript bounds what is read of a main script.
const maxScript = 1 << 20

// Python and Node clients leave nothing in /proc that names them: no
// library is mapped (kafka-python, aiokafka and KafkaJS are pure Python or
// JavaScript) and the interpreter does not name its threads. What the
// process does show is its main script (the command line names it) and the
// interpreter, whose package directories hold the installed version. So a
// client is taken as identified only when the main script imports it; a
// package merely installed is not evidence that the process uses it.

// pythonImport and nodeImport are compiled on first use, not in the
// package's init, which every kdiag command ran (issue 17).
var pythonImport = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^[ \t]*(?:from[ \t]+(kafka|aiokafka|confluent_kafka)(?:\.[\w.]+)?[ \t]+import\b|import[ \t]+(kafka|aiokafka|confluent_kafka)\b)`)
})

var nodeImport = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:require\(\s*|import\(\s*|from\s+|import\s+)['"](kafkajs|node-rdkafka)['"]`)
})

// pythonArgs returns the main script, or the code of -c, or the module of
// -m, of a python command line (python [options] script|-c code|-m mod).
func pythonArgs(args []string) (script, code, module string) {
	withValue := map[string]bool{"-W": true, "-X": true, "--check-hash-based-pycs": true}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" && i+1 < len(args):
			return "", args[i+1], ""
		case a == "-m" && i+1 < len(args):
			return "", "", args[i+1]
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			return "", a[2:], ""
		case strings.HasPrefix(a, "-m") && len(a) > 2:
			return "", "", a[2:]
		case withValue[a]:
			i++
		case a == "-" || a == "--":
			return "", "", ""
		case strings.HasPrefix(a, "-"):
		default:
			return a, "", ""
		}
	}
	return "", "", ""
}

// nodeArgs returns the main script, or the code of -e/-p, of a node command
// line.
func nodeArgs(args []string) (script, code string) {
	withValue := map[string]bool{"-r": true, "--require": true, "--import": true, "--loader": true,
		"--experimental-loader": true, "--conditions": true, "-C": true, "--env-file": true, "--title": true}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-e" || a == "--eval" || a == "-p" || a == "--print") && i+1 < len(args):
			return "", args[i+1]
		case withValue[a]:
			i++
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], ""
			}
			return "", ""
		case strings.HasPrefix(a, "-"):
		default:
			return a, ""
		}
	}
	return "", ""
}

// readScript reads the start of a script the process names.
func (p *proc) readScript(name string) (string, error) {
	f, err := os.Open(p.file(name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxScript))
	return string(b), err
}

// lineOf returns the 1-based line of byte offset i in s.
func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

func (p *proc) pythonClient() (Client, bool, string) {
	script, code, module := pythonArgs(p.args)
	src, where := code, "its -c code"
	switch {
	case module != "":
		return Client{}, false, "a python process running module " + module + " (-m): its imports were not read"
	case script != "":
		s, err := p.readScript(script)
		if err != nil {
			return Client{}, false, fmt.Sprintf("a python process whose main script %s could not be read (%v)", script, err)
		}
		src, where = s, p.abs(script)
	case code == "":
		return Client{}, false, "a python process without a main script"
	}
	m := pythonImport().FindStringSubmatchIndex(src)
	if m == nil {
		return Client{}, false, fmt.Sprintf("a python process whose main script %s imports no Kafka client", where)
	}
	var mod string
	if m[2] >= 0 {
		mod = src[m[2]:m[3]]
	} else {
		mod = src[m[4]:m[5]]
	}
	lib, dist := KafkaPython, "kafka_python"
	switch mod {
	case "aiokafka":
		lib, dist = AIOKafka, "aiokafka"
	case "confluent_kafka":
		// confluent-kafka-python maps librdkafka, which is found first;
		// here its extension module is not loaded yet.
		return Client{}, false, fmt.Sprintf("%s imports confluent_kafka, but librdkafka is not mapped (yet)", where)
	}
	c := Client{Library: lib, Language: "Python"}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s line %d: %s", where, lineOf(src, m[0]), strings.TrimSpace(src[m[0]:m[1]])))
	dirs := p.pythonPackageDirs(script)
	for _, d := range dirs {
		if v, meta := p.pythonDistVersion(d, dist); v != "" {
			c.Version = v
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s %s installed for %s (%s)", lib, v, p.exeName(), meta))
			return c, true, ""
		}
	}
	c.Evidence = append(c.Evidence, fmt.Sprintf("version unknown: no %s package metadata in %s", dist, strings.Join(dirs, ", ")))
	return c, true, ""
}

// pythonPackageDirs lists where the interpreter looks for packages, as far
// as the process shows it: the script's directory, PYTHONPATH, a virtual
// environment (VIRTUAL_ENV, or argv[0] under a venv's bin/), the
// interpreter's prefix and Debian's dist-packages.
func (p *proc) pythonPackageDirs(script string) []string {
	var dirs []string
	add := func(d string) {
		if d != "" {
			for _, x := range dirs {
				if x == d {
					return
				}
			}
			dirs = append(dirs, d)
		}
	}
	if script != "" {
		add(path.Dir(p.abs(script)))
	}
	for _, d := range filepath.SplitList(p.env["PYTHONPATH"]) {
		add(d)
	}
	exe := p.exe
	ver := strings.TrimPrefix(path.Base(exe), "python") // "3.11"
	if !strings.Contains(ver, ".") {
		ver = ""
	}
	lib := func(prefix, sub string) {
		if ver != "" {
			add(path.Join(prefix, "lib", "python"+ver, sub))
		}
	}
	venvs := []string{p.env["VIRTUAL_ENV"]}
	if len(p.args) > 0 && path.IsAbs(p.args[0]) && path.Base(path.Dir(p.args[0])) == "bin" {
		venvs = append(venvs, path.Dir(path.Dir(p.args[0])))
	}
	for _, v := range venvs {
		if v == "" {
			continue
		}
		if _, err := os.Stat(p.file(path.Join(v, "pyvenv.cfg"))); err == nil {
			lib(v, "site-packages")
		}
	}
	if exe != "" {
		lib(path.Dir(path.Dir(exe)), "site-packages")
	}
	lib("/usr/local", "dist-packages")
	add("/usr/lib/python3/dist-packages")
	lib("/usr", "site-packages")
	return dirs
}

// pythonDistVersion finds <dist>-<version>.dist-info or .egg-info in dir
// (the names pip and setuptools give package metadata, dashes in the
// project name written as underscores) and returns the version and the
// directory it came from.
func (p *proc) pythonDistVersion(dir, dist string) (string, string) {
	names, err := readDirNames(p.file(dir))
	if err != nil {
		return "", ""
	}
	for _, n := range names {
		for _, suf := range []string{".dist-info", ".egg-info"} {
			rest, ok := strings.CutSuffix(n, suf)
			if !ok {
				continue
			}
			name, v, ok := strings.Cut(rest, "-")
			if ok && strings.EqualFold(strings.ReplaceAll(name, "-", "_"), dist) {
				// The egg-info of a Debian package may carry a Python
				// tag: kafka_python-2.0.2.egg-info, or -py3.11.
				v, _, _ = strings.Cut(v, "-py")
				return v, path.Join(dir, n)
			}
		}
	}
	return "", ""
}

func (p *proc) nodeClient() (Client, bool, string) {
	script, code := nodeArgs(p.args)
	src, where := code, "its -e code"
	from := ""
	switch {
	case script != "":
		s, err := p.readScript(script)
		if err != nil {
			return Client{}, false, fmt.Sprintf("a node process whose main script %s could not be read (%v)", script, err)
		}
		src, where, from = s, p.abs(script), p.abs(script)
	case code == "":
		return Client{}, false, "a node process without a main script"
	}
	var m []int
	for _, x := range nodeImport().FindAllStringSubmatchIndex(src, -1) {
		if src[x[2]:x[3]] == "kafkajs" {
			m = x
			break
		}
	}
	if m == nil {
		return Client{}, false, fmt.Sprintf("a node process whose main script %s requires no Kafka client", where)
	}
	c := Client{Library: KafkaJS, Language: "JavaScript"}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s line %d: %s", where, lineOf(src, m[0]), strings.TrimSpace(src[m[0]:m[1]])))
	if from == "" {
		if cwd, err := p.cwd(); err == nil {
			from = path.Join(cwd, "[eval]")
		}
	}
	if v, pj := p.nodePackageVersion(from, "kafkajs"); v != "" {
		c.Version = v
		c.Evidence = append(c.Evidence, "version "+v+" from "+pj)
	} else {
		c.Evidence = append(c.Evidence, "version unknown: no node_modules/kafkajs/package.json where Node resolves it")
	}
	return c, true, ""
}

// nodePackageVersion resolves package pkg as Node's require does from file
// from (node_modules of each parent directory, then NODE_PATH, then
// $HOME/.node_modules, $HOME/.node_libraries and <prefix>/lib/node) and
// returns the version of its package.json and where it is. A file inside
// the package itself (an addon under node_modules/pkg/build/) finds it too.
func (p *proc) nodePackageVersion(from, pkg string) (string, string) {
	var cands []string
	for d := path.Dir(from); from != ""; d = path.Dir(d) {
		if path.Base(d) == pkg {
			cands = append(cands, path.Join(d, "package.json"))
		}
		if path.Base(d) != "node_modules" {
			cands = append(cands, path.Join(d, "node_modules", pkg, "package.json"))
		}
		if d == "/" || d == "." {
			break
		}
	}
	for _, d := range filepath.SplitList(p.env["NODE_PATH"]) {
		if d != "" {
			cands = append(cands, path.Join(d, pkg, "package.json"))
		}
	}
	if h := p.env["HOME"]; h != "" {
		cands = append(cands, path.Join(h, ".node_modules", pkg, "package.json"), path.Join(h, ".node_libraries", pkg, "package.json"))
	}
	if p.exe != "" {
		cands = append(cands, path.Join(path.Dir(path.Dir(p.exe)), "lib", "node", pkg, "package.json"))
	}
	for _, c := range cands {
		b, err := os.ReadFile(p.file(c))
		if err != nil {
			continue
		}
		var pj struct{ Name, Version string }
		if json.Unmarshal(b, &pj) == nil && pj.Name == pkg && pj.Version != "" {
			return pj.Version, c
		}
	}
	return "", ""
}
