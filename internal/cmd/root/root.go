// Package root assembles kdiag's command tree.
package root

import (
	"strings"

	brokercmd "github.com/kdiag/kdiag/internal/cmd/broker"
	doctorcmd "github.com/kdiag/kdiag/internal/cmd/doctor"
	lintcmd "github.com/kdiag/kdiag/internal/cmd/lint"
	producecmd "github.com/kdiag/kdiag/internal/cmd/produce"
	reportcmd "github.com/kdiag/kdiag/internal/cmd/report"
	reprocmd "github.com/kdiag/kdiag/internal/cmd/repro"
	rulescmd "github.com/kdiag/kdiag/internal/cmd/rules"
	"github.com/kdiag/kdiag/internal/cmd/scan"
	"github.com/kdiag/kdiag/internal/cmd/version"
	"github.com/kdiag/kdiag/internal/cmd/watch"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/spf13/cobra"
)

// commands are kdiag's subcommands in the order help lists them, each a
// constructor: a new command is one line here.
var commands = []struct {
	name string
	new  func(*cmdutil.Factory) *cobra.Command
}{
	{"version", version.NewCmdVersion},
	{"scan", func(f *cmdutil.Factory) *cobra.Command { return scan.NewCmdScan(f, nil) }},
	{"broker", func(f *cmdutil.Factory) *cobra.Command { return brokercmd.NewCmdBroker(f, nil) }},
	{"lint", func(f *cmdutil.Factory) *cobra.Command { return lintcmd.NewCmdLint(f, nil) }},
	{"rules", func(f *cmdutil.Factory) *cobra.Command { return rulescmd.NewCmdRules(f, nil) }},
	{"produce", func(f *cmdutil.Factory) *cobra.Command { return producecmd.NewCmdProduce(f, nil) }},
	{"watch", func(f *cmdutil.Factory) *cobra.Command { return watch.NewCmdWatch(f, nil) }},
	{"report", func(f *cmdutil.Factory) *cobra.Command { return reportcmd.NewCmdReport(f, nil) }},
	{"repro", func(f *cmdutil.Factory) *cobra.Command { return reprocmd.NewCmdRepro(f, nil) }},
	{"doctor", func(f *cmdutil.Factory) *cobra.Command { return doctorcmd.NewCmdDoctor(f, nil) }},
}

// NewCmdRoot returns the kdiag command with every subcommand attached.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	return buildRoot(f, "")
}

// NewCmdRootFor returns the kdiag command to run args (os.Args[1:]): when
// they name a subcommand, with only that one attached, since building a
// command allocates its flags and touches its package's code, and a run
// of `kdiag version` should not pay for watch's forty flags (issue 17).
// Anything else (no command, help, completion, a flag or name it does not
// know) gets every subcommand, so that help and cobra's suggestions see
// them all.
func NewCmdRootFor(f *cmdutil.Factory, args []string) *cobra.Command {
	return buildRoot(f, commandName(args))
}

// commandName returns the subcommand args run, skipping the root's own
// flag (--proc-root), or "" when they run none of kdiag's commands.
func commandName(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--proc-root":
			i++
			continue
		case strings.HasPrefix(a, "--proc-root="):
			continue
		}
		for _, c := range commands {
			if c.name == a {
				return a
			}
		}
		return ""
	}
	return ""
}

// buildRoot returns the root with the subcommand named only, or with every
// one when only is "".
func buildRoot(f *cmdutil.Factory, only string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kdiag <command> [flags]",
		Short: "Diagnose CLOSE_WAIT buildup between Kafka producers and brokers",
		Long: `kdiag finds, explains and reproduces CLOSE_WAIT buildup on Kafka producer hosts.

  See:       kdiag doctor, kdiag scan, kdiag watch, kdiag report
  Check:     kdiag lint, kdiag rules
  Reproduce: kdiag repro, kdiag broker, kdiag produce`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.PersistentFlags().StringVar(&f.ProcRoot, "proc-root", f.ProcRoot, "root of the proc filesystem (for fixtures)")
	_ = cmd.PersistentFlags().MarkHidden("proc-root")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return cmdutil.UsageErrorf("%s (see '%s --help')", flagError(err), c.CommandPath())
	})
	for _, c := range commands {
		if only == "" || c.name == only {
			cmd.AddCommand(c.new(f))
		}
	}
	usageArgs(cmd)
	return cmd
}

// usageArgs makes every command's argument errors usage errors (exit 2)
// that say what the command takes: cobra's own say "unknown command" for
// an argument to a command that takes none, and exit 1.
func usageArgs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		usageArgs(c)
	}
	if cmd.Args == nil || cmd.HasSubCommands() {
		return
	}
	check := cmd.Args
	cmd.Args = func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			if len(args) > 0 && strings.HasPrefix(err.Error(), "unknown command") {
				return cmdutil.UsageErrorf("%s takes no arguments, only flags, and was given %q (see '%s --help')", c.CommandPath(), args[0], c.CommandPath())
			}
			return cmdutil.UsageErrorf("%v; usage: %s (see '%s --help')", err, c.UseLine(), c.CommandPath())
		}
		return nil
	}
}

// flagError rewrites pflag's parse errors, which end in Go's strconv text
// (`strconv.Atoi: parsing "abc": invalid syntax`), into what the flag
// wants.
func flagError(err error) string {
	msg := err.Error()
	head, tail, ok := strings.Cut(msg, " flag: strconv.")
	if !ok {
		return msg
	}
	switch {
	case strings.HasPrefix(tail, "ParseBool"):
		return head + " flag: want true or false"
	case strings.HasPrefix(tail, "ParseFloat"):
		return head + " flag: want a number"
	case strings.Contains(tail, "value out of range"):
		return head + " flag: the number is out of range"
	}
	return head + " flag: want a whole number"
}
