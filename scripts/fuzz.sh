#!/usr/bin/env bash
# Runs every fuzz target of the module, one after the other, each for
# FUZZTIME (default 60s), and prints one line per target: package, target,
# the time it ran, its execs, its result, the longest time its exec count
# stood still, and the load average before and after it. Results go in
# docs/fuzz.md.
#
#   scripts/fuzz.sh                        # every target, 60 s each, 1 worker
#   FUZZTIME=5m PARALLEL=2 scripts/fuzz.sh
#   scripts/fuzz.sh FuzzValue FuzzRead     # only these targets (names as regexps)
#
# The targets are found, not listed here: every `func FuzzX(f *testing.F)` in
# the test files `go list` says this platform builds, so a new target runs
# without a change to this script. An input that fails is written by go test
# under the package's testdata/fuzz/FuzzX/ (commit it with the fix: it is then
# a case of every `go test`); the log of each target is kept in LOGDIR (a
# temporary directory by default) and its path printed on failure. The exit
# status is 1 when any target failed, after all of them ran.
#
# PARALLEL is go test's -parallel, the number of fuzzing workers (default 1:
# the machines this runs on are shared; the results say what it was).
#
# execs is go test's count, which a worker reports only when it returns a
# batch: on a loaded machine a worker can run for tens of seconds without
# returning (golang/go#51484: "0/sec" lines), and what it ran when the time
# is up goes uncounted. still_s, the longest run of "0/sec" lines (3 s each),
# says when execs is an undercount.
#
# A run that fails with a bare "context deadline exceeded" and writes no
# input is Go's coordinator racing its own -fuzztime deadline
# (golang/go#75804, fixed in Go 1.27), not a finding: the target is run
# again, at most twice, and the result says so.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
PARALLEL=${PARALLEL:-1}
LOGDIR=${LOGDIR:-$(mktemp -d)}
mkdir -p "$LOGDIR"

# Every fuzz target as "import-path dir target", from the test files of each
# package this platform builds.
targets() {
  go list -f '{{$d := .Dir}}{{$p := .ImportPath}}{{range .TestGoFiles}}{{$p}} {{$d}} {{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$p}} {{$d}} {{.}}{{"\n"}}{{end}}' ./... |
    while read -r pkg dir file; do
      [ -n "$pkg" ] || continue
      sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "$dir/$file" | while read -r name; do
        echo "$pkg $dir $name"
      done
    done | sort -u
}

# wanted NAME [REGEXP...]: whether the target NAME is to run (all without
# REGEXPs).
wanted() {
  local name=$1; shift
  [ $# -eq 0 ] && return 0
  for re in "$@"; do
    [[ $name =~ ^($re)$ ]] && return 0
  done
  return 1
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime | sed 's/.*average[s]*: //; s/,//g'; }

failed=0 ran=0
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) $(nproc 2>/dev/null || sysctl -n hw.ncpu) CPUs, commit $(git describe --always --dirty 2>/dev/null || echo "${COMMIT:-unknown}"), -fuzztime $FUZZTIME -parallel $PARALLEL, logs in $LOGDIR"
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' package target fuzzed execs still_s result load_before load_after
while read -r pkg dir name; do
  wanted "$name" "$@" || continue
  ran=$((ran + 1))
  log=$LOGDIR/$name.log
  before=$(loadavg)
  retries=0
  while :; do
    # -run '^$': no other test of the package; the target's seeds and
    # testdata corpus still run first. -timeout 0: go test's default 10 m
    # would cut a long FUZZTIME short.
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel "$PARALLEL" -timeout 0 "$pkg" >"$log" 2>&1; then
      result=ok
      [ "$retries" -gt 0 ] && result="ok (run $((retries + 1)): go#75804 deadline race before)"
      break
    fi
    if [ "$retries" -lt 2 ] && grep -qx '    context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
      mv "$log" "$log.deadline-race.$retries"
      retries=$((retries + 1))
      continue
    fi
    result=FAIL failed=1
    break
  done
  after=$(loadavg)
  # The last progress line: "fuzz: elapsed: 1m0s, execs: 700470 (14774/sec), ..."
  last=$(grep -E '^fuzz: elapsed: .*execs: [0-9]+' "$log" | tail -1 || true)
  elapsed=$(sed -n 's/^fuzz: elapsed: \([^,]*\),.*/\1/p' <<<"$last")
  execs=$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' <<<"$last")
  still=$(awk '/^fuzz: elapsed: .*execs: / { if (/\(0\/sec\)/) { n++; if (n > m) m = n } else n = 0 } END { print 3 * m }' "$log")
  if [ "$result" = FAIL ]; then
    where=$(grep -o 'testdata/fuzz/[^ ]*' "$log" | head -1 || true)
    result="FAIL ${where:+$dir/$where }(log: $log)"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pkg" "$name" "${elapsed:--}" "${execs:--}" "$still" "$result" "$before" "$after"
done < <(targets)
if [ "$ran" -eq 0 ]; then
  echo "fuzz.sh: no fuzz target matched $*" >&2
  exit 2
fi
exit "$failed"
