// Package testbin builds the kdiag binary for tests that run it as a user
// does (a child process, a signal, a kill -9), once per test binary.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// BuildKdiag builds ./cmd/kdiag into dir and returns the binary's path. The
// module root is found from this file's location, so it works from any
// package's test directory.
func BuildKdiag(dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testbin: cannot locate the module root")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	goBin, err := GoBinary()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kdiag")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/kdiag")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building kdiag: %v\n%s", err, out)
	}
	return bin, nil
}

// GoBinary returns the go command that runs the tests: the one on PATH, or
// the one in $GOROOT/bin (which go test sets).
func GoBinary() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go"), nil
	}
	return "", fmt.Errorf("testbin: no go command on PATH and GOROOT unset")
}

// Main is a TestMain body: it builds kdiag into a temporary directory, sets
// *bin to its path, runs the tests and removes the directory. what names the
// tests in the error printed when the build fails.
func Main(run func() int, bin *string, what string) int {
	dir, err := os.MkdirTemp("", "kdiag-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = BuildKdiag(dir); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	return run()
}
