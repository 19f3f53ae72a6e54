#!/usr/bin/env bash
# Records a real CLOSE_WAIT leak with kdiag watch --record: the leaker helper
# (internal/cmd/watch/testdata/leaker) opens connections its own listener
# closes and never reads them, so CLOSE_WAIT grows by STEP per second for
# GROW seconds, holds for HOLD seconds, then drains. The recording written is
# the fixed input of report's golden files (report/testdata/leak.jsonl).
#
#   scripts/record-leak.sh [OUT.jsonl]      (default report/testdata/leak.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-report/testdata/leak.jsonl}
STEP=${STEP:-4} GROW=${GROW:-20} HOLD=${HOLD:-10} DRAIN=${DRAIN:-5}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/kdiag" ./cmd/kdiag
go build -o "$tmp/leaker" ./internal/cmd/watch/testdata/leaker
mkfifo "$tmp/in"
# The broker's usual port, when free, so the recording looks like a cluster.
"$tmp/leaker" -close-port 19092 -lifetime 5m <"$tmp/in" >"$tmp/leaker.out" &
exec 3>"$tmp/in"
for _ in $(seq 50); do grep -q ready "$tmp/leaker.out" 2>/dev/null && break; sleep 0.1; done
pid=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$tmp/leaker.out")
echo "est 3" >&3
rm -f "$out"
total=$((GROW + HOLD + DRAIN + 3))
"$tmp/kdiag" watch --pid "$pid" --state close-wait,established --interval "${INTERVAL:-500ms}" \
  --duration "${total}s" --stuck-age 5s --record "$out" >"$tmp/watch.out" &
watch=$!
sleep 1
for _ in $(seq "$GROW"); do echo "open $STEP" >&3; sleep 1; done
sleep "$HOLD"
per=${PER:-$((STEP * 2))}
for _ in $(seq "$DRAIN"); do echo "close $per" >&3; sleep 1; done
wait "$watch"
exec 3>&-
cat "$tmp/watch.out"
echo "recorded $(wc -l <"$out") snapshots to $out"
