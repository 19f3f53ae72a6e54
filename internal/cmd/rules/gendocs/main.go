// Command gendocs writes docs/rules.md from kdiag's rule catalog. It runs
// from `go generate ./internal/cmd/rules/` (see the //go:generate line in
// internal/cmd/rules/rules.go); TestDocsUpToDate fails when the committed
// file differs from what it would write.
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
	flag.Parse()
	var buf bytes.Buffer
	if err := rulescmd.Markdown(&buf, rules.All(), os.DirFS(*testdata)); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
