package cmdutil

import (
	"strings"
	"testing"

	"github.com/kdiag/kdiag/netstat"
	"github.com/spf13/pflag"
)

func TestFiltersQuery(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(q netstat.Query) bool
		wantErr string
	}{
		{"defaults", nil, func(q netstat.Query) bool { return q.States == netstat.AllStates && q.Process == nil }, ""},
		{"all filters", []string{"--state", "close-wait,established", "--pid", "1,2", "--process", "^java$", "--port", "9092", "--remote", "127.0.0.1:9093", "--brokers", "127.0.0.1:9092"},
			func(q netstat.Query) bool {
				return q.States == netstat.States(netstat.CloseWait, netstat.Established) && len(q.PIDs) == 2 && q.Process.MatchString("java") &&
					q.RemotePorts[0] == 9092 && q.Remotes[0].Port == 9093 && len(q.Brokers) == 1
			}, ""},
		{"bad state", []string{"--state", "closed-wait"}, nil, "--state"},
		{"bad pid", []string{"--pid", "0"}, nil, "--pid 0"},
		{"bad regexp", []string{"--process", "("}, nil, "--process"},
		{"bad port", []string{"--port", "70000"}, nil, "--port 70000"},
		{"bad source", []string{"--source", "ss"}, nil, "--source"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f Filters
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			AddFilterFlags(fs, &f)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			q, err := f.Query()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ExitCode(err) != ExitUsage {
					t.Errorf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(q) {
				t.Errorf("query %+v, err %v", q, err)
			}
		})
	}
}
