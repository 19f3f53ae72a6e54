package root

import (
	"strings"
	"testing"

	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	io, _, _, _ := cmdutil.Test()
	return NewCmdRoot(cmdutil.NewFactory(io, "kdiag"))
}

// TestUsageErrors: a wrong argument or flag value is a usage error (exit 2)
// that says what the command wants, not Go's or cobra's internals.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
		not  string
	}{
		{[]string{"scan", "--pid", "abc"}, `invalid argument "abc" for "--pid" flag: want a whole number`, "strconv"},
		{[]string{"scan", "extra-arg"}, `kdiag scan takes no arguments, only flags, and was given "extra-arg"`, "unknown command"},
		{[]string{"report", "a.jsonl", "b.jsonl"}, "usage: kdiag report FILE", ""},
		{[]string{"report"}, "usage: kdiag report FILE", ""},
		{[]string{"watch", "--quiet=maybe"}, "want true or false", "strconv"},
		{[]string{"scan", "--warn", "99999999999999999999"}, "out of range", "strconv"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := newRoot()
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if code := cmdutil.ExitCode(err); code != cmdutil.ExitUsage {
				t.Errorf("exit %d (%v), want %d", code, err, cmdutil.ExitUsage)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.not != "" && strings.Contains(err.Error(), tt.not)) {
				t.Errorf("error %q, want it to say %q and not %q", err, tt.want, tt.not)
			}
		})
	}
}

// TestHelpShowsBoolFlagsPlainly walks every command: a bool flag shows as
// --quiet, not --quiet[=true|false], and every command has an example.
func TestHelpShowsBoolFlagsPlainly(t *testing.T) {
	cmd := newRoot()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		if u := c.LocalFlags().FlagUsages(); strings.Contains(u, "[=true|false]") {
			t.Errorf("%s --help:\n%s", c.CommandPath(), u)
		}
		if c.Runnable() && c.Example == "" && c != cmd {
			t.Errorf("%s has no example in its --help", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(cmd)
}
