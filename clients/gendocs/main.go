// Command gendocs writes docs/clients.md from kdiag's client catalog. It
// runs from `go generate ./clients/` (see the //go:generate line in
// clients/catalog.go); TestDocsUpToDate fails when the committed file
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
	out := flag.String("out", "docs/clients.md", "file to write")
	flag.Parse()
	var buf bytes.Buffer
	if err := clients.Markdown(&buf, clients.All()); err == nil {
		err = os.WriteFile(*out, buf.Bytes(), 0o644)
		if err == nil {
			return
		}
		fmt.Fprintln(os.Stderr, "gendocs:", err)
	} else {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
	}
	os.Exit(1)
}
