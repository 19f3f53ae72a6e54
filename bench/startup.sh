#!/usr/bin/env bash
# What starting kdiag costs: `kdiag version` against `ss -V` and against Go
# binaries that link less of kdiag (a hello world, and mains that import
# only the version command, then scan with it, then scan and watch), side
# by side, alternating (bench/scanbench: wall, CPU, peak RSS, load), and
# against deps-inits, a main that imports every package kdiag links but
# its own, blank, and does nothing: what those packages' inits cost in a
# binary of their size (their code laid out densely), then
# the package inits of `kdiag version` (GODEBUG=inittrace=1, mean of 10
# runs): their total and the costliest. Results go in BENCHMARKS.md
# ("start-up").
#
#   bench/startup.sh
#   RUNS=41 bench/startup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-21}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build() { CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$@"; }
build "$tmp/kdiag" ./cmd/kdiag
go build -o "$tmp/scanbench" ./bench/scanbench

# The partial mains live in a directory of the module (they import its
# internal packages), removed on exit.
part=$(mktemp -d ./cmd/startup-bench.XXXXXX)
trap 'rm -rf "$tmp" "$part"' EXIT
mkmain() { # mkmain NAME IMPORTS... : a main adding those commands to a root
  local name=$1
  shift
  mkdir -p "$part/$name"
  {
    echo 'package main'
    echo 'import ('
    echo '	"os"'
    echo '	"github.com/kdiag/kdiag/internal/cmdutil"'
    echo '	"github.com/spf13/cobra"'
    for p in "$@"; do echo "	\"github.com/kdiag/kdiag/internal/cmd/$p\""; done
    echo ')'
    echo 'func main() {'
    echo '	f := cmdutil.NewFactory(cmdutil.System(), "kdiag")'
    echo '	c := &cobra.Command{Use: "kdiag"}'
    echo '	c.AddCommand(version.NewCmdVersion(f))'
    for p in "$@"; do [ "$p" != version ] && echo "	c.AddCommand($p.NewCmd${p^}(f, nil))"; done
    echo '	if c.Execute() != nil {'
    echo '		os.Exit(1)'
    echo '	}'
    echo '}'
  } >"$part/$name/main.go"
  build "$tmp/$name" "./$part/$name"
}
mkmain only-version version
mkmain version-scan version scan
mkmain version-scan-watch version scan watch
mkdir -p "$part/hello"
printf 'package main\n\nimport "os"\n\nfunc main() { os.Stdout.WriteString("hello\\n") }\n' >"$part/hello/main.go"
build "$tmp/hello" "./$part/hello"
mkdir -p "$part/deps-inits"
{
  echo 'package main'
  echo 'import ('
  CGO_ENABLED=0 go list -deps ./cmd/kdiag | grep -v -E '^github.com/kdiag/|^(internal|vendor)/|/internal(/|$)|^(runtime|runtime/cgo|unsafe)$' | sed 's/.*/\t_ "&"/'
  echo ')'
  echo 'func main() {}'
} >"$part/deps-inits/main.go"
build "$tmp/deps-inits" "./$part/deps-inits"
echo "== kdiag $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes'), $(stat -c %s "$tmp/kdiag") bytes; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$tmp/scanbench" -runs "$RUNS" ${QUIET:+-quiet "$QUIET"} \
  "$tmp/kdiag version" "ss -V" "$tmp/hello" "$tmp/only-version version" "$tmp/version-scan version" "$tmp/version-scan-watch version" "$tmp/deps-inits" |
  sed "s|$tmp/||g"
echo
echo "package inits of kdiag version (GODEBUG=inittrace=1, mean of 10 runs):"
for _ in $(seq 1 10); do GODEBUG=inittrace=1 "$tmp/kdiag" version 2>&1 >/dev/null; done |
  awk '$1 == "init" {t[$2] += $5 / 10; a[$2] += $8 / 10; n[$2] = 1}
       END {for (k in t) {tt += t[k]; aa += a[k]; np++}
            printf "  %d packages, %.2f ms, %.0f KB allocated\n", np, tt, aa / 1024
            for (k in t) printf "%.3f %d %s\n", t[k], a[k], k}' |
  { read -r head; echo "$head"; sort -rn | head -12 | awk '{printf "  %6.3f ms %8d B  %s\n", $1, $2, $3}'; }
