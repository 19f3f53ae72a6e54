// Package procconfig finds the Kafka client configuration a running process
// uses: the files its command line names (*.properties, *.yml, *.yaml,
// *.conf, Spring's spring.config.location and active profiles), the Spring
// Boot files of its working directory (application.yml and .properties,
// config/), and its environment (Spring's relaxed SPRING_KAFKA_* and the
// KAFKA_* convention of Confluent's images). It parses what it finds with
// package config, in the dialect the process's client reads; linting is the
// caller's (package rules).
package procconfig

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/rules"
)

// maxFile bounds what is read of one config file.
const maxFile = 4 << 20

// Source is one configuration found for a process.
type Source struct {
	// Path is the file as the process names it, or "environment".
	Path string `json:"path"`
	// How says why it was taken: the argument that names it, the working
	// directory, the variables.
	How     string `json:"how"`
	Dialect string `json:"dialect"`
	// File is the parsed file; nil when it could not be read (Err says).
	File *config.File `json:"-"`
	Err  string       `json:"error,omitempty"`
	// Vars names, for the environment, the variable of each line of File.
	Vars []string `json:"-"`
	// Env is the process's environment: what its ${VAR} and
	// ${VAR:default} placeholders resolve from (rules.Options.Env).
	Env map[string]string `json:"-"`
}

// Where writes a position of the source for people: path:line, or the
// variable.
func (s Source) Where(line int) string {
	if s.Vars != nil && line >= 1 && line <= len(s.Vars) {
		return "environment " + s.Vars[line-1]
	}
	return fmt.Sprintf("%s:%d", s.Path, line)
}

// Find returns the configuration of process pid under procRoot that client
// reads. Files are read in the process's own filesystem
// (<procRoot>/<pid>/root, relative names under <procRoot>/<pid>/cwd).
func Find(procRoot string, pid int, client clients.Client) []Source {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	cl, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return nil
	}
	args := splitNUL(cl)
	env := map[string]string{}
	var envOrder []string
	if b, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		for _, kv := range splitNUL(b) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
				envOrder = append(envOrder, k)
			}
		}
	}
	f := finder{dir: dir, client: client}
	for _, c := range candidates(args, env) {
		f.add(c.path, c.how)
	}
	// Spring Boot's default locations, relative to the working directory
	// (Spring Boot reference, "External Application Properties").
	if client.Library == "" || client.Library == clients.KafkaClients {
		profiles := activeProfiles(args, env)
		for _, d := range []string{"", "config/"} {
			for _, base := range append([]string{"application"}, prefixed("application-", profiles)...) {
				for _, ext := range []string{".properties", ".yml", ".yaml"} {
					if _, err := os.Stat(f.file(d + base + ext)); err == nil {
						f.add(d+base+ext, "in the working directory (Spring Boot's default location)")
					}
				}
			}
		}
	}
	if s, ok := envSource(env, envOrder, client); ok {
		f.out = append(f.out, s)
	}
	if client.Library == "" || client.Library == clients.KafkaClients {
		f.addLogs()
	}
	for i := range f.out {
		f.out[i].Env = env
	}
	return f.out
}

// maxLogTail bounds what is read of one log: its last part, where the
// newest producer's block is.
const maxLogTail = 8 << 20

// addLogs adds, from the regular files the process holds open whose name
// says log, the last "ProducerConfig values:" block the Java client logged
// there (AbstractConfig.logAll, at INFO when a producer is created): the
// effective configuration, defaults included.
func (f *finder) addLogs() {
	ents, err := os.ReadDir(filepath.Join(f.dir, "fd"))
	if err != nil {
		return
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(f.dir, "fd", e.Name()))
		if err != nil || !filepath.IsAbs(target) || !strings.Contains(strings.ToLower(filepath.Base(target)), "log") || slices.Contains(f.seen, target) {
			continue
		}
		f.seen = append(f.seen, target)
		path := filepath.Join(f.dir, "fd", e.Name())
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		fh, err := os.Open(path)
		if err != nil {
			continue
		}
		if st.Size() > maxLogTail {
			_, err = fh.Seek(st.Size()-maxLogTail, io.SeekStart)
		}
		var data []byte
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(fh, maxLogTail))
		}
		fh.Close()
		if err != nil || !config.IsProducerLog(string(data)) {
			continue
		}
		blocks := config.ParseProducerLog(target, string(data))
		if len(blocks) == 0 {
			continue
		}
		how := "open by the process: the last ProducerConfig values block of its log (the Java client's effective configuration)"
		if len(blocks) > 1 {
			how = fmt.Sprintf("open by the process: the last of the %d ProducerConfig values blocks of its log (one per producer created)", len(blocks))
		}
		f.out = append(f.out, Source{Path: target, How: how, Dialect: config.Java.String(), File: blocks[len(blocks)-1]})
	}
}

type finder struct {
	dir    string
	client clients.Client
	out    []Source
	seen   []string
}

func (f *finder) file(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Join(f.dir, "root", name)
	}
	return filepath.Join(f.dir, "cwd", name)
}

func (f *finder) add(name, how string) {
	if slices.Contains(f.seen, name) {
		return
	}
	f.seen = append(f.seen, name)
	s := Source{Path: name, How: how}
	fh, err := os.Open(f.file(name))
	if err != nil {
		s.Err = err.Error()
		f.out = append(f.out, s)
		return
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxFile))
	fh.Close()
	if err != nil {
		s.Err = err.Error()
		f.out = append(f.out, s)
		return
	}
	d := config.Detect(name, data)
	if f.client.Catalog() != nil && (f.client.Library == clients.Librdkafka || f.client.Catalog().Core == clients.Librdkafka) {
		d = config.Librdkafka // a librdkafka program reads librdkafka's keys, whatever the file is called
	}
	s.Dialect = d.String()
	s.File, err = config.Parse(name, data, d)
	if err != nil {
		s.Err = err.Error()
	}
	f.out = append(f.out, s)
}

type candidate struct{ path, how string }

var configExts = []string{".properties", ".yml", ".yaml", ".conf"}

func isConfigName(s string) bool {
	for _, e := range configExts {
		if strings.HasSuffix(strings.ToLower(s), e) {
			return true
		}
	}
	return false
}

// candidates returns the config files a command line names: arguments (or
// the value of a --flag=value) ending in a config extension, and the
// comma lists of spring.config.location and spring.config.additional-
// location, as -D properties, --arguments or SPRING_CONFIG_* variables.
func candidates(args []string, env map[string]string) []candidate {
	var out []candidate
	for i, a := range args {
		if i == 0 {
			continue
		}
		key, val, hasEq := strings.Cut(a, "=")
		k := strings.TrimLeft(strings.TrimPrefix(key, "-D"), "-")
		if hasEq && (k == "spring.config.location" || k == "spring.config.additional-location") {
			for _, l := range strings.Split(val, ",") {
				l = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(l), "optional:"), "file:")
				if isConfigName(l) {
					out = append(out, candidate{l, "named by " + key})
				}
			}
			continue
		}
		if loggingConfigKeys[k] {
			// The logging framework's file (log4j.properties): no
			// producer configuration is in it.
			continue
		}
		switch {
		case hasEq && isConfigName(val) && !strings.Contains(val, ","):
			// A file: URL names an absolute path (file:/etc/app/x, or
			// file:///etc/app/x), not a name relative to the cwd.
			val = fileURLPath(val)
			out = append(out, candidate{val, "named on the command line (" + key + "=)"})
		case !hasEq && isConfigName(a) && !strings.HasPrefix(a, "-"):
			out = append(out, candidate{a, "named on the command line"})
		}
	}
	for _, v := range []string{"SPRING_CONFIG_LOCATION", "SPRING_CONFIG_ADDITIONALLOCATION"} {
		for _, l := range strings.Split(env[v], ",") {
			l = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(l), "optional:"), "file:")
			if isConfigName(l) {
				out = append(out, candidate{l, "named by " + v})
			}
		}
	}
	return out
}

// loggingConfigKeys are the system properties that name a logging
// framework's configuration (log4j 1 and 2, logback, java.util.logging).
var loggingConfigKeys = map[string]bool{
	"log4j.configuration": true, "log4j.configurationFile": true, "log4j2.configurationFile": true,
	"logback.configurationFile": true, "java.util.logging.config.file": true,
}

// fileURLPath turns a file: URL (file:/etc/x, file:///etc/x, as
// -Dlog4j.configuration and Spring locations write them) into its path;
// anything else is returned as it is.
func fileURLPath(s string) string {
	p, ok := strings.CutPrefix(s, "file:")
	if !ok {
		return s
	}
	if rest, ok := strings.CutPrefix(p, "//"); ok {
		// file://host/path: only an empty host (or localhost) is local.
		rest = strings.TrimPrefix(rest, "localhost")
		if strings.HasPrefix(rest, "/") {
			return rest
		}
	}
	return p
}

// activeProfiles returns Spring's active profiles: spring.profiles.active
// as a -D property, an --argument or SPRING_PROFILES_ACTIVE.
func activeProfiles(args []string, env map[string]string) []string {
	var list string
	for _, a := range args {
		for _, p := range []string{"-Dspring.profiles.active=", "--spring.profiles.active="} {
			if v, ok := strings.CutPrefix(a, p); ok {
				list = v
			}
		}
	}
	if list == "" {
		list = env["SPRING_PROFILES_ACTIVE"]
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" && !strings.ContainsAny(p, "/\\") {
			out = append(out, p)
		}
	}
	return out
}

func prefixed(pre string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = pre + x
	}
	return out
}

// envSource turns the Kafka settings of an environment into one source:
// SPRING_KAFKA_* by Spring's relaxed binding (upper case, "_" for ".":
// SPRING_KAFKA_PRODUCER_PROPERTIES_CONNECTIONS_MAX_IDLE_MS is
// spring.kafka.producer.properties.connections.max.idle.ms), and KAFKA_*
// as the key with "_" for "." (Confluent's images' convention), only for
// keys the Java client or librdkafka has, so that KAFKA_HOME and the like
// are not taken for settings.
func envSource(env map[string]string, order []string, client clients.Client) (Source, bool) {
	var spring, plain []string
	var springVars, plainVars []string
	lib := client.Library == clients.Librdkafka || (client.Catalog() != nil && client.Catalog().Core == clients.Librdkafka)
	for _, k := range order {
		v := env[k]
		switch {
		case strings.HasPrefix(k, "SPRING_KAFKA_"):
			key := strings.ToLower(strings.ReplaceAll(k, "_", "."))
			spring = append(spring, config.EscapeKey(key)+"="+config.EscapeValue(v))
			springVars = append(springVars, k)
		case strings.HasPrefix(k, "KAFKA_"):
			key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "KAFKA_"), "_", "."))
			_, java := rules.JavaSetting(key)
			_, rd := rules.LibrdkafkaSetting(key)
			if java || rd {
				plain = append(plain, config.EscapeKey(key)+"="+config.EscapeValue(v))
				plainVars = append(plainVars, k)
			}
		}
	}
	var (
		text string
		vars []string
		d    config.Dialect
		how  string
	)
	switch {
	case len(spring) > 0:
		text, vars, d, how = strings.Join(spring, "\n"), springVars, config.Spring, "SPRING_KAFKA_* variables (Spring's relaxed binding)"
	case len(plain) > 0:
		d = config.Java
		if lib {
			d = config.Librdkafka
		}
		text, vars, how = strings.Join(plain, "\n"), plainVars, "KAFKA_* variables (KAFKA_CONNECTIONS_MAX_IDLE_MS is connections.max.idle.ms)"
	default:
		return Source{}, false
	}
	name := "environment"
	var f *config.File
	var err error
	if d == config.Spring {
		f, err = config.ParseSpringProperties(name+".properties", strings.NewReader(text+"\n"))
	} else {
		f, err = config.Parse(name, []byte(text+"\n"), d)
	}
	s := Source{Path: name, How: how, Dialect: d.String(), File: f, Vars: vars}
	if f != nil {
		f.Path = name
	}
	if err != nil {
		s.Err = err.Error()
	}
	return s, true
}

func splitNUL(b []byte) []string {
	s := strings.TrimRight(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
