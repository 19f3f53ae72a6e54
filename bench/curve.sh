#!/usr/bin/env bash
# The cost curve: kdiag scan and watch against ss at several sizes, each a
# third CLOSE_WAIT and two thirds ESTABLISHED sockets (case D's mix) held by
# bench/mksockets over processes of at most 10,000 descriptors, every
# command of a size timed side by side, alternating (bench/scanbench), the
# load printed with each row. Appends tab-separated rows to OUT and draws
# the plot (bench/plot) into SVG. Results go in BENCHMARKS.md ("cost
# curve").
#
#   bench/curve.sh                                  # 1,000 10,000 60,000 200,000 sockets
#   SIZES="1000 10000" RUNS=5 WATCH=20s bench/curve.sh
#   PARTS=watch WATCH=20s bench/curve.sh             # the watch rows alone
#
# PARTS says which rows to time: scan (kdiag scan and ss), watch, or both
# (the default, "scan watch"). The plot keeps the last row of each size and
# command, so a part run again replaces its own rows only.
#
# As root with unshare and ip, each size runs in network and PID namespaces
# of its own. Needs go and ss; 200,000 sockets need about 1.5 GB of kernel
# memory and a hard open-file limit of at least 10,000.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-1000 10000 60000 200000}
RUNS=${RUNS:-5}
WATCH=${WATCH:-30s}
PARTS=${PARTS:-scan watch}
OUT=${OUT:-bench/results/curve.tsv}
SVG=${SVG:-bench/results/curve.svg}
export RUNS WATCH PARTS

if [ -z "${KDIAG_BENCH_INNER:-}" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag" ./cmd/kdiag
  go build -o "$tmp/mksockets" ./bench/mksockets
  go build -o "$tmp/scanbench" ./bench/scanbench
  mkdir -p "$(dirname "$OUT")"
  commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"
  printf '# kdiag %s, %s, %s cores, %s\n' "$commit" "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$(uname -r)" >>"$OUT"
  for size in $SIZES; do
    export BIN=$tmp KDIAG_BENCH_INNER=1 SIZE=$size OUT=$(realpath "$OUT")
    if [ "${ISOLATE:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
      unshare -n -p -f --mount-proc bash "$0"
    else
      bash "$0"
    fi
  done
  go run ./bench/plot -o "$SVG" "$OUT"
  echo "== plot: $SVG" >&2
  exit
fi

. bench/lib.sh
trap stop_holder EXIT INT TERM
ip link set lo up 2>/dev/null || true
raise_nofile
N=$((SIZE / 3))
M=$((SIZE - N))
M=$((M / 2 * 2)) # both ends of M/2 connections
READY_WAIT=600 hold_sockets "$BIN/mksockets" "$BIN" "$N" "$M" 40m
echo "== $SIZE sockets: $(ss -tanH state close-wait | wc -l) CLOSE_WAIT, $(ss -tanH state established | wc -l) ESTABLISHED; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
K=$BIN/kdiag
case " $PARTS " in *" scan "*)
  "$BIN/scanbench" -runs "$RUNS" -warmup 1 -label "$SIZE" -tsv "$OUT" \
    "$K scan --state close-wait -o json" \
    "ss -tan state close-wait" \
    "ss -tanp state close-wait" \
    "$K scan -o json" \
    "ss -tan" \
    "ss -tanp" | sed "s|$BIN/||g"
  ;;
esac
case " $PARTS " in *" watch "*)
  "$BIN/scanbench" -runs 2 -label "$SIZE" -tsv "$OUT" -exit-ok 0,3 \
    "$K watch --state close-wait,established --interval 1s --duration $WATCH --quiet" \
    "$K watch --state close-wait,established --events off --interval 1s --duration $WATCH --quiet" \
    "$K watch --interval 1s --duration $WATCH --quiet" | sed "s|$BIN/||g"
  ;;
esac
