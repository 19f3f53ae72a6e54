// Package deploy_test checks the fleet manifests against the binary they
// deploy: the alert rules pass promtool, every metric the rules and the
// dashboard query is one kdiag exports, and the DaemonSet asks for exactly
// the access kdiag needs and passes flags kdiag accepts.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/cmd/root"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/metrics"
	"go.yaml.in/yaml/v3"
)

// exportedMetrics returns the names of the metrics kdiag watch serves, from
// the collector's own list of families.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range metrics.Families() {
		names[f.Name] = true
	}
	if len(names) == 0 {
		t.Fatal("the metrics collector describes no metrics")
	}
	return names
}

var metricRef = regexp.MustCompile(`\bkdiag_[a-z_]+\b`)

func checkMetricRefs(t *testing.T, file string, text string, exported map[string]bool) {
	t.Helper()
	refs := metricRef.FindAllString(text, -1)
	if len(refs) == 0 {
		t.Fatalf("%s references no kdiag metric", file)
	}
	for _, r := range refs {
		if !exported[r] {
			t.Errorf("%s queries %s, which kdiag does not export (it exports %v)", file, r, sortedKeys(exported))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAlertRulesQueryExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("prometheus/kdiag-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("kdiag-alerts.yml: %v", err)
	}
	exported := exportedMetrics(t)
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			checkMetricRefs(t, "alert "+r.Alert, r.Expr, exported)
		}
	}
}

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/kdiag-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("kdiag-dashboard.json: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	exported := exportedMetrics(t)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkMetricRefs(t, "panel "+p.Title, tg.Expr, exported)
		}
	}
}

func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
	}
	for _, args := range [][]string{
		{"check", "rules", "kdiag-alerts.yml"},
		{"test", "rules", "kdiag-alerts_test.yml"},
	} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type container struct {
	Name string   `yaml:"name"`
	Args []string `yaml:"args"`
	Env  []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Resources struct {
		Limits struct {
			Memory string `yaml:"memory"`
		} `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
		Privileged               bool `yaml:"privileged"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type manifest struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Template struct {
			Spec struct {
				HostPID     bool        `yaml:"hostPID"`
				HostNetwork bool        `yaml:"hostNetwork"`
				Containers  []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func daemonSet(t *testing.T) manifest {
	t.Helper()
	b, err := os.ReadFile("kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("daemonset.yaml: %v", err)
		}
		if m.Kind == "DaemonSet" {
			return m
		}
	}
	t.Fatal("daemonset.yaml has no DaemonSet")
	return manifest{}
}

func TestDaemonSetAccess(t *testing.T) {
	ds := daemonSet(t)
	pod := ds.Spec.Template.Spec
	if !pod.HostPID {
		t.Error("hostPID must be true: kdiag attributes sockets through the node's /proc")
	}
	if pod.HostNetwork {
		t.Error("hostNetwork is not needed: kdiag enters each namespace itself")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	sc := pod.Containers[0].SecurityContext
	if sc.Privileged || sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem {
		t.Errorf("securityContext too broad: privileged=%v allowPrivilegeEscalation=%v readOnlyRootFilesystem=%v",
			sc.Privileged, sc.AllowPrivilegeEscalation, sc.ReadOnlyRootFilesystem)
	}
	if diff := cmp.Diff([]string{"ALL"}, sc.Capabilities.Drop); diff != "" {
		t.Errorf("capabilities.drop (-want +got):\n%s", diff)
	}
	add := append([]string(nil), sc.Capabilities.Add...)
	sort.Strings(add)
	if diff := cmp.Diff([]string{"DAC_READ_SEARCH", "SYS_ADMIN", "SYS_PTRACE"}, add); diff != "" {
		t.Errorf("capabilities.add (-want +got):\n%s", diff)
	}
}

// TestDaemonSetArgsParse runs the DaemonSet's arguments through kdiag's own
// command tree, so a renamed or removed flag fails here, not on a node.
func TestDaemonSetArgsParse(t *testing.T) {
	args := daemonSet(t).Spec.Template.Spec.Containers[0].Args
	ios, _, _, _ := cmdutil.Test()
	cmd := root.NewCmdRoot(cmdutil.NewFactory(ios, "kdiag"))
	sub, rest, err := cmd.Find(args)
	if err != nil {
		t.Fatalf("kdiag %v: %v", args, err)
	}
	if sub.Name() != "watch" {
		t.Fatalf("DaemonSet runs kdiag %s, want watch", sub.Name())
	}
	if err := sub.ParseFlags(rest); err != nil {
		t.Fatalf("kdiag %s: %v", strings.Join(args, " "), err)
	}
	if l := sub.Flags().Lookup("listen"); l == nil || !strings.HasSuffix(l.Value.String(), ":9813") {
		t.Errorf("the DaemonSet must serve metrics with --listen on :9813, got %v", l)
	}
}

// TestDaemonSetMemoryLimit: the DaemonSet's GOMEMLIMIT is one the Go runtime
// accepts (a child started with it runs), and leaves the container room
// below limits.memory for what the Go heap does not count (the mapped
// binary, stacks): between half and seven eighths of it.
func TestDaemonSetMemoryLimit(t *testing.T) {
	c := daemonSet(t).Spec.Template.Spec.Containers[0]
	var limit string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			limit = e.Value
		}
	}
	if limit == "" {
		t.Fatal("the DaemonSet sets no GOMEMLIMIT: watch's heap can grow to the container's memory limit")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+limit)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a Go program with GOMEMLIMIT=%s: %v\n%s", limit, err, out)
	}
	soft := parseSize(t, "GOMEMLIMIT", limit, map[string]int64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30})
	hard := parseSize(t, "limits.memory", c.Resources.Limits.Memory, map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30})
	if soft < hard/2 || soft > hard/8*7 {
		t.Errorf("GOMEMLIMIT %s is not between a half and seven eighths of limits.memory %s", limit, c.Resources.Limits.Memory)
	}
}

// parseSize reads a number with one of units' suffixes.
func parseSize(t *testing.T, what, v string, units map[string]int64) int64 {
	t.Helper()
	for u, mult := range units {
		if n, ok := strings.CutSuffix(v, u); ok {
			if x, err := strconv.ParseInt(n, 10, 64); err == nil {
				return x * mult
			}
		}
	}
	t.Fatalf("%s %q: not a number with a unit of %v", what, v, units)
	return 0
}
