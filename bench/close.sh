#!/usr/bin/env bash
# What finding held CLOSE sockets costs: kdiag at OLD (default ad04571, the
# last commit before it) against kdiag now, side by side in one run,
# alternating, on N CLOSE_WAIT and M ESTABLISHED sockets held by several
# processes, for the default --state all scan (which now dumps every table
# state and walks every fd) and for --state close-wait (which must not get
# slower). ss -tan is the kernel's dump for scale. Results go in
# BENCHMARKS.md.
#
#   N=20000 M=40000 bench/close.sh
#   OLD=<commit> RUNS=11 bench/close.sh
#
# As root with unshare and ip the sockets live in a private network
# namespace (NETNS=0: the current one). Needs go, git, ss.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
M=${M:-40000}
RUNS=${RUNS:-7}
OLD=${OLD:-ad04571}
LIFETIME=${LIFETIME:-10m}
export N M RUNS LIFETIME

if [ -z "${KDIAG_BENCH_INNER:-}" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir "$tmp/old"
  git archive "$OLD" | tar -x -C "$tmp/old"
  (cd "$tmp/old" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag-old" ./cmd/kdiag)
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag-new" ./cmd/kdiag
  go build -o "$tmp/mksockets" ./bench/mksockets
  go build -o "$tmp/scanbench" ./bench/scanbench
  export BIN=$tmp OLD KDIAG_BENCH_INNER=1
  if [ "${NETNS:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
    unshare -n bash "$0"
  else
    bash "$0"
  fi
  exit
fi

. bench/lib.sh
trap stop_holder EXIT INT TERM
ip link set lo up 2>/dev/null || true
echo "== holding $N CLOSE_WAIT and $M ESTABLISHED sockets" >&2
hold_sockets "$BIN/mksockets" "$BIN" "$N" "$M" "$LIFETIME"
echo "== machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); old is $OLD" >&2
"$BIN/scanbench" -runs "$RUNS" -label "N=$N M=$M" \
  "$BIN/kdiag-old scan -o json" \
  "$BIN/kdiag-new scan -o json" \
  "$BIN/kdiag-old scan --state close-wait -o json" \
  "$BIN/kdiag-new scan --state close-wait -o json" \
  "ss -tan"
echo "== after: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
