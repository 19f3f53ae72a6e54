#!/usr/bin/env bash
# Times kdiag lint on large generated configurations (bench/mkconfig), text
# and json output, RUNS times each, and prints the median wall time and the
# largest peak RSS (GNU time's %M) of each, with the machine's load. The
# inputs: 100,000 unknown keys (a KD404 did-you-mean search each) and about
# 50 MB of mixed settings. Results go in BENCHMARKS.md ("kdiag lint").
#
#   bench/lint.sh
#   RUNS=5 SIZE=50000000 KEYS=100000 KDIAG=/path/to/kdiag bench/lint.sh
#   TIMEOUT=300 bench/lint.sh     # give up on a run after 300 s
#
# Needs: go, GNU time (/usr/bin/time). Writes only under a temporary
# directory, removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
KEYS=${KEYS:-100000}
SIZE=${SIZE:-50000000}
TIMEOUT=${TIMEOUT:-600}
[ -x /usr/bin/time ] || { echo "bench/lint.sh: needs GNU time (apt-get install -y time)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${KDIAG:-}" ]; then
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag" ./cmd/kdiag
  KDIAG=$tmp/kdiag
fi
go run ./bench/mkconfig -keys "$KEYS" >"$tmp/keys.properties"
go run ./bench/mkconfig -size "$SIZE" >"$tmp/big.properties"

echo "kdiag: $KDIAG ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "machine: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %-6s %10s %12s %10s  %s\n' input format "median s" "peak RSS MB" findings load
for input in keys big; do
  f=$tmp/$input.properties
  bytes=$(stat -c %s "$f")
  lines=$(wc -l <"$f")
  for format in text json; do
    times=()
    peak=0
    findings=?
    for _ in $(seq 1 "$RUNS"); do
      set +e
      timeout "$TIMEOUT" /usr/bin/time -f '%e %M' -o "$tmp/time" \
        "$KDIAG" lint --fail-on none -o "$format" "$f" >"$tmp/out" 2>"$tmp/err"
      rc=$?
      set -e
      if [ "$rc" = 124 ]; then
        times+=(">$TIMEOUT"); break
      fi
      [ "$rc" = 0 ] || { echo "kdiag lint exited $rc:"; cat "$tmp/err"; exit 1; }
      read -r secs kb <"$tmp/time"
      times+=("$secs")
      [ "$kb" -gt "$peak" ] && peak=$kb
      if [ "$format" = text ]; then
        findings=$(tail -1 "$tmp/out" | awk '{print $1}')
      fi
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '%-34s %-6s %10s %12s %10s  %s\n' "$input ($((bytes / 1000000)) MB, $lines lines)" "$format" \
      "$median" "$((peak / 1024))" "$findings" "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
