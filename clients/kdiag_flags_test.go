package clients_test

// TestKdiagValueFlags lives outside package clients because kdiag's
// commands import it (kdiag repro -- CMD names its client): an internal
// test importing them would be an import cycle. export_test.go hands it
// what it checks.

import (
	"slices"
	"testing"

	"github.com/kdiag/kdiag/clients"
	brokercmd "github.com/kdiag/kdiag/internal/cmd/broker"
	producecmd "github.com/kdiag/kdiag/internal/cmd/produce"
	reprocmd "github.com/kdiag/kdiag/internal/cmd/repro"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/spf13/pflag"
)

// TestKdiagValueFlags holds the flags Identify knows to take a value
// against the commands' own flag sets, and the broker's --idle default:
// a new flag with a value must be added there, or its value would be
// read as an argument.
func TestKdiagValueFlags(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := &cmdutil.Factory{IO: ios}
	for _, tc := range []struct {
		name   string
		flags  *pflag.FlagSet
		valued []string
	}{
		{"produce", producecmd.NewCmdProduce(f, nil).Flags(), clients.ProduceValueFlags},
		{"broker", brokercmd.NewCmdBroker(f, nil).Flags(), clients.BrokerValueFlags},
		{"repro", reprocmd.NewCmdRepro(f, nil).Flags(), clients.ReproValueFlags},
	} {
		tc.flags.VisitAll(func(fl *pflag.Flag) {
			takes := fl.Value.Type() != "bool"
			if takes != slices.Contains(tc.valued, fl.Name) {
				t.Errorf("kdiag %s --%s (%s): takes a value %v, but Identify's list says %v", tc.name, fl.Name, fl.Value.Type(), takes, !takes)
			}
			if fl.Shorthand != "" && takes != slices.Contains(tc.valued, fl.Shorthand) {
				t.Errorf("kdiag %s -%s: takes a value %v, but Identify's list says %v", tc.name, fl.Shorthand, takes, !takes)
			}
		})
	}
	idle := brokercmd.NewCmdBroker(f, nil).Flags().Lookup("idle")
	if idle == nil || idle.DefValue != clients.BrokerDefaultIdle.String() {
		t.Errorf("kdiag broker --idle default %v, Identify assumes %s", idle, clients.BrokerDefaultIdle)
	}
}
