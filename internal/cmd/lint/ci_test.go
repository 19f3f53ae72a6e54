package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kdiag/kdiag/internal/cmdutil"
)

// root is the repository's top, where .pre-commit-hooks.yaml and action.yml
// live.
var root = filepath.Join("..", "..", "..")

// TestPreCommitHook checks .pre-commit-hooks.yaml as pre-commit reads it: a
// list of hooks; kdiag-lint runs "kdiag lint" built with Go; its files
// pattern (a Python regular expression; this one is also RE2) picks
// configuration files and leaves others; its args are lint's flags.
func TestPreCommitHook(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, ".pre-commit-hooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var hooks []struct {
		ID       string   `yaml:"id"`
		Name     string   `yaml:"name"`
		Entry    string   `yaml:"entry"`
		Language string   `yaml:"language"`
		Files    string   `yaml:"files"`
		Args     []string `yaml:"args"`
	}
	if err := yaml.Unmarshal(b, &hooks); err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 || hooks[0].ID != "kdiag-lint" || hooks[0].Entry != "kdiag lint" || hooks[0].Language != "golang" || hooks[0].Name == "" {
		t.Fatalf("hooks = %+v", hooks)
	}
	re, err := regexp.Compile(hooks[0].Files)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"producer.properties": true, "config/kafka-producer.properties": true, "deploy/rdkafka.conf": true,
		"src/main/resources/application.yml": true, "src/main/resources/application-prod.properties": true,
		"connect/docker-compose-connect.yml": true, "README.md": false, ".github/workflows/ci.yml": false,
		"src/main/resources/log4j.properties": false, "package.json": false,
	} {
		if re.MatchString(name) != want {
			t.Errorf("files pattern on %q = %v, want %v", name, !want, want)
		}
	}
	checkLintFlags(t, hooks[0].Args)
}

// checkLintFlags parses args with kdiag lint's own flags.
func checkLintFlags(t *testing.T, args []string) {
	t.Helper()
	ios, _, _, _ := cmdutil.Test()
	cmd := NewCmdLint(&cmdutil.Factory{IO: ios}, func(*LintOptions) error { return nil })
	cmd.SetArgs(append(append([]string{}, args...), "x.properties"))
	if err := cmd.Execute(); err != nil {
		t.Errorf("kdiag lint %v: %v", args, err)
	}
}

// TestAction checks action.yml: a composite action whose steps build kdiag,
// run kdiag lint -o sarif with the inputs (passed through the environment,
// never pasted into the script), upload the SARIF to code scanning even
// when lint failed, and then fail the job on lint's exit status.
func TestAction(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Name   string                       `yaml:"name"`
		Inputs map[string]map[string]string `yaml:"inputs"`
		Runs   struct {
			Using string `yaml:"using"`
			Steps []struct {
				Name string            `yaml:"name"`
				ID   string            `yaml:"id"`
				Uses string            `yaml:"uses"`
				If   string            `yaml:"if"`
				Run  string            `yaml:"run"`
				Env  map[string]string `yaml:"env"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Name == "" || a.Runs.Using != "composite" {
		t.Fatalf("name %q, runs.using %q", a.Name, a.Runs.Using)
	}
	var lint, upload, fail int = -1, -1, -1
	for i, s := range a.Runs.Steps {
		switch {
		case strings.Contains(s.Run, "kdiag\" lint -o sarif"):
			lint = i
			if strings.Contains(s.Run, "${{") {
				t.Errorf("the lint script pastes inputs into shell: %s", s.Run)
			}
			for _, in := range []string{"paths", "fail-on", "kafka-version", "args", "sarif-file"} {
				found := false
				for _, v := range s.Env {
					found = found || v == "${{ inputs."+in+" }}"
				}
				if !found {
					t.Errorf("input %s does not reach the lint step", in)
				}
				if _, ok := a.Inputs[in]; !ok {
					t.Errorf("input %s is not declared", in)
				}
			}
		case strings.HasPrefix(s.Uses, "github/codeql-action/upload-sarif@"):
			upload = i
			if !strings.Contains(s.If, "always()") || s.With["sarif_file"] != "${{ inputs.sarif-file }}" {
				t.Errorf("upload step %+v: want it to run always, with the SARIF file", s)
			}
		case strings.Contains(s.If, "steps.lint.outputs.exit-code"):
			fail = i
		}
	}
	if lint < 0 || upload < lint || fail < upload {
		t.Errorf("steps: lint %d, upload %d, fail %d: want lint, then upload, then fail", lint, upload, fail)
	}
	checkLintFlags(t, []string{"-o", "sarif", "--fail-on", a.Inputs["fail-on"]["default"], "--kafka-version", "3.9"})
}
