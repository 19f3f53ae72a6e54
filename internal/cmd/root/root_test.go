package root

import (
	"fmt"
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

func TestCommandName(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"version"}, "version"},
		{[]string{"scan", "--state", "close-wait"}, "scan"},
		{[]string{"--proc-root", "/x", "doctor", "--pid", "1"}, "doctor"},
		{[]string{"--proc-root=/x", "lint", "a.properties"}, "lint"},
		{[]string{"help", "scan"}, ""},
		{[]string{"completion", "bash"}, ""},
		{[]string{"__complete", "sc"}, ""},
		{[]string{"--help"}, ""},
		{[]string{"verison"}, ""},
		{[]string{"--proc-root"}, ""},
	}
	for _, tt := range tests {
		if got := commandName(tt.args); got != tt.want {
			t.Errorf("commandName(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestRootForIsTheSame: a tree built for one command runs it as the whole
// tree does: its help (which also lists the root's flags) and its argument
// errors read the same.
func TestRootForIsTheSame(t *testing.T) {
	run := func(cmd *cobra.Command, out *strings.Builder, args []string) error {
		cmd.SetOut(out)
		cmd.SetErr(out)
		cmd.SetArgs(args)
		return cmd.Execute()
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {"--proc-root", "/nonexistent", c.name, "--no-such-flag"}} {
			io, _, _, _ := cmdutil.Test()
			var all, one strings.Builder
			errAll := run(NewCmdRoot(cmdutil.NewFactory(io, "kdiag")), &all, args)
			root := NewCmdRootFor(cmdutil.NewFactory(io, "kdiag"), args)
			if n := len(root.Commands()); n != 1 {
				t.Errorf("%q: the tree has %d commands, want 1", args, n)
			}
			errOne := run(root, &one, args)
			if all.String() != one.String() || fmt.Sprint(errAll) != fmt.Sprint(errOne) {
				t.Errorf("%q: whole tree %q (%v), one command %q (%v)", args, all.String(), errAll, one.String(), errOne)
			}
		}
	}
}
