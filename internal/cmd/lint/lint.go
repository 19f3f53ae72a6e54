// Package lint implements `kdiag lint`: check producer configuration files
// for connection risks and for settings the Java client rejects or silently
// overrides.
package lint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/kdiag/kdiag/config"
	rulescmd "github.com/kdiag/kdiag/internal/cmd/rules"
	"github.com/kdiag/kdiag/internal/cmd/version"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/rules"
	"github.com/kdiag/kdiag/rules/output"
	"github.com/spf13/cobra"
)

// LintOptions are kdiag lint's parsed flags and dependencies.
type LintOptions struct {
	IO *cmdutil.IOStreams
	// ReadFile reads an input: readRegular, which refuses what is not a
	// regular file without blocking on it, unless a test makes one fail.
	ReadFile func(name string) (string, error)
	// ToolVersion is written into json and sarif output.
	ToolVersion string
	// Getwd gives the directory relative paths are relative to, %SRCROOT%
	// in SARIF: os.Getwd unless a test fixes it.
	Getwd func() (string, error)

	// Args are the inputs: files, directories (walked) and "-" (stdin).
	Args []string
	// Dialect forces every input's dialect; "" detects it per file.
	Dialect string
	// StdinName is the name standard input is reported under, and detected
	// by (--stdin-name application.yml).
	StdinName    string
	KafkaVersion string
	// BrokerConfig is a broker server.properties to read
	// connections.max.idle.ms from; BrokerIdleMS is that value given
	// directly, used when BrokerIdleSet.
	BrokerConfig  string
	BrokerIdleMS  int64
	BrokerIdleSet bool
	// FailOn is the lowest severity that makes the exit status 1: info,
	// warning, error, or none.
	FailOn string
	Format string
	// Ignore lists rule IDs whose findings are dropped.
	Ignore []string
	// Profiles are the Spring profile sets to lint Spring files with,
	// each a comma list of profiles active together (--profile); none
	// lints a file that has profile documents with no profile active and
	// with each profile it names, one at a time.
	Profiles []string
	// EnvFile is an environment file (NAME=value lines) whose variables
	// resolve placeholders: Spring's ${NAME:default}, the Java client's
	// ${env:NAME}, a template's ${NAME}.
	EnvFile string
}

// configExts are the file names a directory walk picks up.
var configExts = []string{".properties", ".yml", ".yaml", ".conf", ".json", ".env"}

// skipDirs are directories a walk never enters: other people's code.
var skipDirs = map[string]bool{"vendor": true, "node_modules": true}

// NewCmdLint returns `kdiag lint`. runF, when set, receives the parsed
// options instead of running (flag tests).
func NewCmdLint(f *cmdutil.Factory, runF func(*LintOptions) error) *cobra.Command {
	opts := &LintOptions{IO: f.IO, ReadFile: readRegular, Getwd: os.Getwd, ToolVersion: toolVersion()}
	def := rules.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "lint [flags] FILE|DIR|- ...",
		Short: "Check producer configuration for connection risks and rejected settings",
		Long: `Check Kafka producer configuration files: Java client .properties, librdkafka
properties, and Spring Boot application.properties / application.yml; and
the effective configuration the Java client logs at INFO when it creates a
producer ("ProducerConfig values:" blocks in an application log: a file
named *.log, or any input that holds such a block; each block is linted on
its own, against the Kafka version the log names); the producer settings of
Kafka Streams (application.id: plain producer configs and producer.*) and
Kafka Connect (a worker's producer.* and bootstrap.servers, a connector's
producer.override.*, in properties or a connector's *.json), with the
defaults Streams and Connect give their producers; the environment of
Kafka Connect containers (CONNECT_PRODUCER_* variables, as Confluent's images
map them) in a docker-compose file or an env file, checked against the
KAFKA_CONNECTIONS_MAX_IDLE_MS of a broker container in the same compose file;
and configuration files embedded in a Kubernetes ConfigMap (data: entries
named *.properties, *.yml, ...) or a Helm values*.yaml (blocks named so, or
holding bootstrap.servers and the like), at their lines in the YAML.

Each input is a file, a directory (searched recursively for *.properties,
*.yml, *.yaml, *.conf, *.json and *.env, skipping hidden directories, vendor
and node_modules; only regular files are read) or - for standard input. The dialect of each file is detected
from its name and content unless --dialect is given.

A Spring file with profile documents (spring.config.activate.on-profile) is
linted once with no profile active and once with each profile it names, or
with the profile sets --profile gives; a finding that holds in some of them
only says in which ("(in profile prod)").

The findings and a summary line go to standard output (with -o text, in the
compiler style file:line:col: severity RULE message, then the fix); problems
with the run itself, such as a file that cannot be read, go to standard
error. Values of password-type keys are never printed.

Placeholders: a Kafka config provider variable (${env:NAME},
${file:path:key}) of a provider config.providers declares, and a Spring
placeholder without a default, are values known at run time and are not
checked (KD411); a Spring placeholder's default is checked, and the finding
says it is the default; a variable of an undeclared provider, or template
text, is reported (KD410). --env FILE resolves them from NAME=value lines.

A finding is suppressed by a comment on its line or the line above:
  # kdiag:ignore KD101 the broker never closes idle connections here
The rules are listed by 'kdiag rules' and explained by 'kdiag rules explain ID'.

Exit status:
  0  no finding at or above --fail-on
  1  findings at or above --fail-on
  2  bad flags or arguments, an input that could not be read or parsed, a
     binary file, or a directory with no configuration file in it (every
     other input is still checked and reported)`,
		Example: `  # Check one file, and every config file under deploy/
  kdiag lint producer.properties deploy/

  # A Spring Boot YAML from standard input, against a Kafka 3.9 client
  cat application.yml | kdiag lint --stdin-name application.yml --kafka-version 3.9 -

  # Resolve ${KAFKA_LINGER:5}-style placeholders from an environment file
  kdiag lint --env prod.env application.properties

  # The effective configuration a Java producer logged at startup
  kdiag lint app.log

  # A Spring Boot file as its prod profile sees it, for a 2.1 client
  kdiag lint --profile prod --kafka-version 2.1 application.yml

  # Compare with the broker's own idle timeout
  kdiag lint --broker-config /etc/kafka/server.properties producer.properties

  # For GitHub code scanning; fail the job on errors only
  kdiag lint -o sarif --fail-on error config/ > kdiag.sarif`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Args = args
			opts.BrokerIdleSet = cmd.Flags().Changed("broker-idle-ms")
			if runF != nil {
				return runF(opts)
			}
			return runLint(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Dialect, "dialect", "", "dialect of every input: java|librdkafka|spring (default: detected per file)")
	fl.StringVar(&opts.StdinName, "stdin-name", "<stdin>", "file name to report standard input as (also used to detect its dialect)")
	fl.StringVar(&opts.KafkaVersion, "kafka-version", def.KafkaVersion, "Java client version whose defaults and checks apply: 2.0 ... 2.8, 3.9, 4.0, 4.1 or 4.x")
	fl.StringVar(&opts.BrokerConfig, "broker-config", "", "broker `server.properties` to read connections.max.idle.ms from")
	fl.Int64Var(&opts.BrokerIdleMS, "broker-idle-ms", def.BrokerIdleMS, "broker connections.max.idle.ms in milliseconds")
	fl.StringVar(&opts.FailOn, "fail-on", "warning", "lowest severity that makes the exit status 1: info|warning|error|none")
	fl.StringSliceVar(&opts.Ignore, "ignore", nil, "rule IDs to leave out, comma-separated (KD101,KD203)")
	fl.StringArrayVar(&opts.Profiles, "profile", nil, "Spring `profiles` active together (prod, or prod,eu as spring.profiles.active writes them) to lint Spring files with; repeat to lint each set on its own (default: no profile active, then each profile a file's documents name)")
	fl.StringVar(&opts.EnvFile, "env", "", "environment `file` (NAME=value lines) to resolve ${NAME}, ${NAME:default} and ${env:NAME} placeholders with")
	cmdutil.FormatFlag(fl, &opts.Format, "text", output.Formats())
	return cmd
}

// failThreshold reads --fail-on; ok is false for "none".
func failThreshold(s string) (sev rules.Severity, ok bool, err error) {
	if strings.EqualFold(s, "none") {
		return 0, false, nil
	}
	sev, err = rules.ParseSeverity(s)
	if err != nil {
		return 0, false, fmt.Errorf("--fail-on %q: want info, warning, error or none", s)
	}
	return sev, true, nil
}

// input is one configuration to lint: a path, or standard input.
type input struct {
	name  string
	stdin bool
}

func runLint(opts *LintOptions) error {
	if len(opts.Args) == 0 {
		return cmdutil.UsageErrorf("lint: no input: give files, directories or - for standard input (see 'kdiag lint --help')")
	}
	if err := cmdutil.CheckFormat(opts.Format, output.Formats()); err != nil {
		return err
	}
	dialect, err := config.ParseDialect(opts.Dialect)
	if err != nil {
		return cmdutil.UsageErrorf("lint: --dialect: %v", err)
	}
	threshold, failOn, err := failThreshold(opts.FailOn)
	if err != nil {
		return cmdutil.UsageErrorf("lint: %v", err)
	}
	ignore, err := ignoreSet(opts.Ignore)
	if err != nil {
		return err
	}
	ropts, err := lintOptions(opts)
	if err != nil {
		return err
	}

	nstdin := 0
	for _, arg := range opts.Args {
		if arg == "-" {
			nstdin++
		}
	}
	if nstdin > 1 {
		return cmdutil.UsageErrorf("lint: - (standard input) given %d times: it can be read once", nstdin)
	}

	var (
		problems []output.Problem
		inputs   []input
		// walked are the files a directory walk found (not named by
		// the user).
		walked = map[string]bool{}
	)
	report := func(path string, err error) {
		msg := cause(err).Error()
		problems = append(problems, output.Problem{Path: path, Message: msg})
		if !strings.HasPrefix(msg, path+":") {
			// A parser's error that says path:line:col itself is
			// printed as it is, not after the path again.
			msg = path + ": " + msg
		}
		fmt.Fprintf(opts.IO.ErrOut, "kdiag: lint: %s\n", output.Printable(msg))
	}
	note := func(path, msg string) {
		fmt.Fprintf(opts.IO.ErrOut, "kdiag: lint: %s: %s\n", output.Printable(path), msg)
	}
	for _, arg := range opts.Args {
		if arg == "-" {
			inputs = append(inputs, input{name: opts.StdinName, stdin: true})
			continue
		}
		st, err := statInput(arg)
		if err != nil {
			report(arg, err)
			continue
		}
		if !st.IsDir() {
			inputs = append(inputs, input{name: arg})
			continue
		}
		found := walk(arg, report, note)
		for _, p := range found {
			walked[p] = true
		}
		if len(found) == 0 {
			// Nothing checked is no pass: a mistyped path (a directory
			// named d.properties, an empty checkout) must fail CI.
			report(arg, emptyDirError(arg))
		}
		for _, p := range found {
			inputs = append(inputs, input{name: p})
		}
	}

	// A file named twice (or given and also found in a directory) is linted
	// once: its findings would otherwise be counted twice. Files are linted
	// in path order, one at a time: each is read, parsed, checked and its
	// findings written before the next is read, so memory holds one file.
	seen := map[string]bool{}
	var uniq []input
	for _, in := range inputs {
		if !in.stdin {
			key := filepath.Clean(in.name)
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		uniq = append(uniq, in)
	}
	slices.SortStableFunc(uniq, func(a, b input) int { return strings.Compare(a.name, b.name) })

	// A large file's entries are most of the heap, and live until its
	// last finding is written: collecting when the heap has grown by 20%
	// rather than Go's default 100% keeps the peak near what is live
	// (50 MB of properties: 399 -> 263 MB peak RSS at 30%, for 6% more
	// CPU; 207 -> 192 MB at 20%, for no more CPU measured).
	defer debug.SetGCPercent(debug.SetGCPercent(20))

	linted := 0
	failed := false
	findings := func(yield func(rules.Finding) bool) {
		for _, in := range uniq {
			var (
				data string
				err  error
			)
			if in.stdin {
				var b strings.Builder
				_, err = io.Copy(&b, opts.IO.In)
				data = b.String()
			} else {
				data, err = opts.ReadFile(in.name)
			}
			if err != nil {
				report(in.name, err)
				continue
			}
			// One input may hold several configurations (a log, one
			// block per producer), each linted on its own.
			fs, err := config.ParseAll(in.name, data, dialect)
			if err != nil {
				report(in.name, err)
				continue
			}
			linted++
			if len(fs) == 0 && !in.stdin && !walked[in.name] {
				// Named on the command line, yet nothing in it is a
				// producer's configuration: say so rather than pass it.
				note(in.name, "no producer configuration found in it (no ProducerConfig values: block, Connect producer variables or embedded configuration file)")
			}
			for fd := range lintFiles(fs, ropts, opts.Profiles, note) {
				if ignore[fd.RuleID] {
					continue
				}
				if failOn && fd.Severity >= threshold {
					failed = true
				}
				if !yield(fd) {
					return
				}
			}
		}
	}

	base := ""
	getwd := opts.Getwd
	if getwd == nil {
		getwd = os.Getwd
	}
	if wd, err := getwd(); err == nil {
		base = wd
	}
	meta := func() output.Meta {
		return output.Meta{ToolVersion: opts.ToolVersion, Files: linted, Problems: problems, BaseDir: base}
	}
	if err := output.Streams[opts.Format](opts.IO.Out, findings, rules.All(), meta); err != nil {
		return fmt.Errorf("lint: writing %s output: %w", opts.Format, err)
	}
	if len(problems) > 0 {
		// Every unreadable input has been reported above; with nothing
		// linted at all, the text output has no summary either ("no
		// findings in 0 files" would read as a pass).
		return cmdutil.Exit(cmdutil.ExitUsage)
	}
	if failed {
		return cmdutil.Exit(cmdutil.ExitFindings)
	}
	return nil
}

// lintFiles lints the configurations of one input in path order. A Spring
// file with profile documents (or any Spring file, with --profile) is
// linted once per set of active profiles, and the run says which.
func lintFiles(fs []*config.File, ropts rules.Options, profiles []string, note func(path, msg string)) iter.Seq[rules.Finding] {
	sorted := slices.Clone(fs)
	slices.SortStableFunc(sorted, func(a, b *config.File) int { return strings.Compare(a.Path, b.Path) })
	return func(yield func(rules.Finding) bool) {
		for _, f := range sorted {
			seq := rules.Findings(f, ropts)
			if f.Dialect == config.Spring && (len(profiles) > 0 || f.HasProfiles()) {
				evals := config.ProfileEvaluations(f, profiles)
				names := make([]string, len(evals))
				for i, e := range evals {
					names[i] = e.Profile
					if e.Profile == config.DefaultProfile {
						names[i] += " (no profile active)"
					}
				}
				note(f.Path, "Spring profiles, each linted on its own: "+strings.Join(names, "; "))
				seq = slices.Values(rules.LintProfiles(evals, ropts))
			}
			for fd := range seq {
				if !yield(fd) {
					return
				}
			}
		}
	}
}

// lintOptions turns the flags into the engine's options.
func lintOptions(opts *LintOptions) (rules.Options, error) {
	ro := rules.DefaultOptions()
	if opts.KafkaVersion != "" {
		ro.KafkaVersion = opts.KafkaVersion
	}
	if err := ro.Validate(); err != nil {
		return ro, cmdutil.UsageErrorf("lint: --kafka-version: %v", err)
	}
	if opts.EnvFile != "" {
		data, err := opts.ReadFile(opts.EnvFile)
		if err != nil {
			return ro, cmdutil.UsageErrorf("lint: --env %s: %v", opts.EnvFile, cause(err))
		}
		ef := config.ParseEnvFile(opts.EnvFile, data)
		if len(ef.Problems) > 0 {
			p := ef.Problems[0]
			return ro, cmdutil.UsageErrorf("lint: --env %s:%d: %s", opts.EnvFile, p.Pos.Line, p.Msg)
		}
		ro.Env = ef.EnvMap()
	}
	switch {
	case opts.BrokerConfig != "" && opts.BrokerIdleSet:
		return ro, cmdutil.UsageErrorf("lint: --broker-config and --broker-idle-ms are mutually exclusive: give one")
	case opts.BrokerIdleSet:
		if opts.BrokerIdleMS < 0 {
			return ro, cmdutil.UsageErrorf("lint: --broker-idle-ms %d: want milliseconds, 0 or more", opts.BrokerIdleMS)
		}
		ro.BrokerIdleMS, ro.BrokerIdleExplicit = opts.BrokerIdleMS, true
	case opts.BrokerConfig != "":
		data, err := opts.ReadFile(opts.BrokerConfig)
		if err != nil {
			return ro, cmdutil.UsageErrorf("lint: --broker-config %s: %v", opts.BrokerConfig, cause(err))
		}
		ms, set, err := rules.BrokerIdleFromFile(opts.BrokerConfig, strings.NewReader(data))
		if err != nil {
			return ro, cmdutil.UsageErrorf("lint: --broker-config: %v", err)
		}
		if !set {
			fmt.Fprintf(opts.IO.ErrOut, "kdiag: lint: --broker-config %s does not set connections.max.idle.ms: using the broker's default, %d ms\n",
				output.Printable(opts.BrokerConfig), ms)
		}
		ro.BrokerIdleMS, ro.BrokerIdleExplicit = ms, true
	}
	return ro, nil
}

// ignoreSet checks --ignore's rule IDs against the catalog.
func ignoreSet(ids []string) (map[string]bool, error) {
	set := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		r, ok := rules.Lookup(id)
		if !ok {
			return nil, cmdutil.UsageErrorf("lint: --ignore: unknown rule %q%s (see 'kdiag rules')", id, rulescmd.DidYouMean(id))
		}
		set[r.ID] = true
	}
	return set, nil
}

// walk returns the regular configuration files under root, sorted,
// reporting (and going past) what it cannot read. A configuration name that
// is not a regular file (a FIFO, a socket, a device) is skipped with a note:
// reading a FIFO would block until something writes to it. A symbolic link
// counts as what it points to.
func walk(root string, report func(string, error), note func(path, msg string)) []string {
	var out []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			report(path, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || skipDirs[name]) {
				return fs.SkipDir
			}
			return nil
		}
		if !isConfigName(name) {
			return nil
		}
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			st, err := os.Stat(path)
			if err != nil {
				report(path, err)
				return nil
			}
			mode = st.Mode()
		}
		if !mode.IsRegular() {
			note(path, "skipped: "+describeMode(mode)+", not a regular file")
			return nil
		}
		out = append(out, path)
		return nil
	})
	sort.Strings(out)
	return out
}

// emptyDirError is the problem of a directory argument in which the walk
// found no configuration file.
func emptyDirError(dir string) error {
	exts := "*" + strings.Join(configExts, ", *")
	if isConfigName(filepath.Base(filepath.Clean(dir))) {
		return fmt.Errorf("is a directory, not a configuration file, and holds no configuration files (%s): nothing was checked", exts)
	}
	return fmt.Errorf("no configuration files (%s) found in this directory: nothing was checked", exts)
}

func isConfigName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	for _, e := range configExts {
		if ext == e {
			return true
		}
	}
	return false
}

// cause drops the operation and path an *fs.PathError repeats, since the
// message already starts with the path: "lint: a.properties: permission
// denied", not "lint: a.properties: open a.properties: permission denied".
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// toolVersion is kdiag's version without the platform details version.String
// adds: the -ldflags value, else the module version, else "(devel)".
func toolVersion() string {
	if version.Version != "" {
		return version.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
