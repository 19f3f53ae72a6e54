// Command genbugs writes docs/known-bugs.md from kdiag's known-bug catalog.
// It runs from `go generate ./clients/` (see the //go:generate line in
// clients/bugs.go); TestKnownBugDocsUpToDate fails when the committed file
// differs from what it writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/kdiag/kdiag/clients"
)

func main() {
	out := flag.String("out", clients.BugDocsPath, "file to write")
	flag.Parse()
	var buf bytes.Buffer
	err := clients.BugsMarkdown(&buf, clients.KnownBugs())
	if err == nil {
		err = os.WriteFile(*out, buf.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genbugs:", err)
		os.Exit(1)
	}
}
