// Command gendocs writes docs/rules.md from kdiag's rule catalog, and
// internal/cmd/rules/examples_gen.go (the examples `kdiag rules explain`
// prints) from rules/testdata. It runs from `go generate ./internal/cmd/rules/`
// (see the //go:generate line in internal/cmd/rules/rules.go);
// TestDocsUpToDate fails when a committed file differs from what it writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	rulescmd "github.com/kdiag/kdiag/internal/cmd/rules"
	"github.com/kdiag/kdiag/rules"
)

func main() {
	out := flag.String("out", "docs/rules.md", "file to write")
	testdata := flag.String("testdata", "rules/testdata", "the rules' testdata folder, for the examples")
	examples := flag.String("examples", "", "Go file to write the examples into (examples_gen.go)")
	flag.Parse()
	td := os.DirFS(*testdata)
	var buf bytes.Buffer
	if err := rulescmd.Markdown(&buf, rules.All(), td); err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fail(err)
	}
	if *examples != "" {
		src, err := rulescmd.ExamplesSource(rules.All(), td)
		if err != nil {
			fail(err)
		}
		if err := os.WriteFile(*examples, src, 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gendocs:", err)
	os.Exit(1)
}
