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

// NewCmdRoot returns the kdiag command with every subcommand attached.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
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

	cmd.AddCommand(version.NewCmdVersion(f))
	cmd.AddCommand(scan.NewCmdScan(f, nil))
	cmd.AddCommand(brokercmd.NewCmdBroker(f, nil))
	cmd.AddCommand(lintcmd.NewCmdLint(f, nil))
	cmd.AddCommand(rulescmd.NewCmdRules(f, nil))
	cmd.AddCommand(producecmd.NewCmdProduce(f, nil))
	cmd.AddCommand(watch.NewCmdWatch(f, nil))
	cmd.AddCommand(reportcmd.NewCmdReport(f, nil))
	cmd.AddCommand(reprocmd.NewCmdRepro(f, nil))
	cmd.AddCommand(doctorcmd.NewCmdDoctor(f, nil))
	// Subcommands register here, one line each.
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
