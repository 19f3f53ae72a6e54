#!/usr/bin/env bash
# Times kdiag at OLD against kdiag as in the work tree (or at NEW), side by
# side in one run, alternating (bench/scanbench), with N CLOSE_WAIT and M
# ESTABLISHED sockets held by bench/mksockets, and the peer commands after
# "--" for scale. Every optimisation's before and after in BENCHMARKS.md is
# a run of this script.
#
#   OLD=HEAD~1 N=20000 M=40000 bench/ab.sh 'scan --state close-wait -o json' -- 'ss -tan state close-wait'
#   OLD=main N=0 RUNS=21 bench/ab.sh version -- 'ss -V'
#   OLD=abc123 NEW=def456 bench/ab.sh 'scan -o json'
#
# Each argument before "--" is a kdiag command line, run with both
# binaries; each after it is run as given, with kdiag@old and kdiag@new
# standing for the two binaries (e.g. 'kdiag@new scan --fds proc'). QUIET=1.0 waits (up to
# QUIET_WAIT, default 5m) for the 1-minute load to fall below 1.0 first;
# the load is printed with every row anyway. HOLDER_NAME=java runs the
# socket holders under that name (bench/lib.sh).
#
# As root with unshare and ip, everything runs in network and PID
# namespaces of its own (ISOLATE=0: in the current ones): kdiag and the
# peer then see the same sockets and the same processes, those of the
# benchmark, not whatever else the shared machine runs. Needs go, git, ss.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000}
M=${M:-0}
RUNS=${RUNS:-7}
OLD=${OLD:-HEAD}
NEW=${NEW:-}
LIFETIME=${LIFETIME:-15m}
CHURN=${CHURN:-}
HOLDER_NAME=${HOLDER_NAME:-}
export N M RUNS LIFETIME CHURN HOLDER_NAME

if [ -z "${KDIAG_BENCH_INNER:-}" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  build() { # build REV DIR OUT: kdiag at REV (empty: the work tree)
    if [ -z "$1" ]; then
      CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$3" ./cmd/kdiag
      return
    fi
    mkdir -p "$2"
    git archive "$1" | tar -x -C "$2"
    (cd "$2" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$3" ./cmd/kdiag)
  }
  build "$OLD" "$tmp/old" "$tmp/kdiag-old"
  build "$NEW" "$tmp/new" "$tmp/kdiag-new"
  go build -o "$tmp/mksockets" ./bench/mksockets
  go build -o "$tmp/scanbench" ./bench/scanbench
  go build -o "$tmp/pagefault" ./bench/pagefault
  export BIN=$tmp KDIAG_BENCH_INNER=1
  export AB_OLD="$OLD ($(git rev-parse --short "$OLD"))" AB_NEW="${NEW:-work tree at $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + changes')}"
  if [ "${ISOLATE:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
    exec unshare -n -p -f --mount-proc bash "$0" "$@"
  fi
  exec bash "$0" "$@"
fi

# Inner part: in the namespaces the sockets live in.
. bench/lib.sh
trap stop_holder EXIT INT TERM
ip link set lo up 2>/dev/null || true
raise_nofile
if [ "$N" != 0 ] || [ "$M" != 0 ] || [ -n "${CHURN:-}" ]; then
  echo "== holding $N CLOSE_WAIT and $M ESTABLISHED sockets${CHURN:+, churning $CHURN connections/s}" >&2
  hold_sockets "$BIN/mksockets" "$BIN" "$N" "$M" "$LIFETIME"
fi
cmds=()
peer=0
for a in "$@"; do
  if [ "$a" = -- ]; then
    peer=1
    continue
  fi
  if [ "$peer" = 1 ]; then
    a=${a//kdiag@old/$BIN/kdiag-old}
    cmds+=("${a//kdiag@new/$BIN/kdiag-new}")
  else
    cmds+=("$BIN/kdiag-old $a" "$BIN/kdiag-new $a")
  fi
done
echo "== old: $AB_OLD; new: $AB_NEW" >&2
# A page fault's cost (bench/pagefault) with the load: where faults are
# slow, a tool's time follows its resident memory.
echo "== machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), page fault $("$BIN/pagefault")" >&2
"$BIN/scanbench" -runs "$RUNS" -label "N=$N M=$M" ${QUIET:+-quiet "$QUIET" -quiet-wait "${QUIET_WAIT:-5m}"} "${cmds[@]}" |
  sed -e "s|$BIN/kdiag-old|kdiag@old|g" -e "s|$BIN/kdiag-new|kdiag@new|g"
echo "== after: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
