package config

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenView is what a golden file holds for one fixture: the whole parse,
// and what the winning and duplicate entries are.
type goldenView struct {
	Dialect    string             `json:"dialect"`
	Error      string             `json:"error,omitempty"`
	File       *File              `json:"file,omitempty"`
	Effective  map[string]string  `json:"effective,omitempty"`
	Duplicates map[string][]Entry `json:"duplicates,omitempty"`
}

// TestGolden parses every fixture with Parse (dialect detected) and
// compares the result with testdata/golden/<fixture>.golden.
func TestGolden(t *testing.T) {
	var fixtures []string
	for _, pat := range []string{"testdata/*.properties", "testdata/*.conf", "testdata/*.yml", "testdata/broken/*"} {
		m, _ := filepath.Glob(pat)
		fixtures = append(fixtures, m...)
	}
	sort.Strings(fixtures)
	if len(fixtures) < 10 {
		t.Fatalf("only %d fixtures found", len(fixtures))
	}
	for _, path := range fixtures {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			d := Detect(path, data)
			v := goldenView{Dialect: d.String()}
			f, err := Parse(path, data, d)
			if err != nil {
				v.Error = err.Error()
			} else {
				v.File = f
				v.Effective = f.Map()
				if dup := f.Duplicates(); len(dup) > 0 {
					v.Duplicates = dup
				}
			}
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", filepath.Base(path)+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./config -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs (-want +got), review and run with -update:\n%s", golden, diff)
			}
		})
	}
}
