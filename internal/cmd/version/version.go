// Package version implements `kdiag version`.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/spf13/cobra"
)

// Version is set at build time with
// -ldflags "-X github.com/kdiag/kdiag/internal/cmd/version.Version=v1.2.3";
// otherwise the module version from the build info is used (go install).
var Version = ""

// String returns the version line kdiag prints.
func String() string {
	v, commit := Version, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				commit = s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := fmt.Sprintf("kdiag %s %s/%s %s", v, runtime.GOOS, runtime.GOARCH, runtime.Version())
	if commit != "" {
		out += " commit " + commit
	}
	return out
}

// NewCmdVersion returns `kdiag version`.
func NewCmdVersion(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print kdiag's version",
		Example: "  kdiag version   # e.g. kdiag v0.1.0 linux/amd64 go1.26.8 commit 0123456789ab",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(f.IO.Out, String())
			return err
		},
	}
}
