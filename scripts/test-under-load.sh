#!/usr/bin/env bash
# Runs the whole test suite RUNS times (default 3) while a second
# `go test -race -count=1 ./...` loads the machine, as CI may run beside
# other work, and says for each run whether it passed, how long it took and
# the load average. Tests must not depend on winning a race against a timer:
# this is how to check.
#
#   scripts/test-under-load.sh
#   RUNS=5 scripts/test-under-load.sh
#
# The load runs in a loop until the measured runs end. Logs of failures go
# to $LOGDIR (default a temporary directory, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
LOGDIR=${LOGDIR:-$(mktemp -d)}
mkdir -p "$LOGDIR"
echo "logs in $LOGDIR"

# The load: a race run, over and over (a failed one is said, and waited
# out a little, so a broken tree does not spin).
( n=0; while :; do n=$((n+1)); go test -race -count=1 ./... >"$LOGDIR/load$n.log" 2>&1 || { echo "load run $n failed: $LOGDIR/load$n.log" >&2; sleep 5; }; done ) &
loader=$!
trap 'kill $loader 2>/dev/null; pkill -P $loader 2>/dev/null || true' EXIT
# Let the load get going (its build first): until the 1-minute load
# average passes 1.5, for at most two minutes.
for _ in $(seq 1 24); do
  awk '{exit !($1 > 1.5)}' /proc/loadavg && break
  sleep 5
done

fail=0
for i in $(seq 1 "$RUNS"); do
  start=$(date +%s)
  if go test -count=1 ./... >"$LOGDIR/run$i.log" 2>&1; then r=pass; else r=FAIL; fail=1; fi
  echo "run $i: $r in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  [ $r = pass ] || grep -E -A20 '^(--- FAIL|FAIL|panic:)' "$LOGDIR/run$i.log" | head -60
done
exit $fail
