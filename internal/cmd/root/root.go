// Package root assembles kdiag's command tree.
package root

import (
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
		return cmdutil.UsageErrorf("%w (see '%s --help')", err, c.CommandPath())
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
	return cmd
}
