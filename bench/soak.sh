#!/usr/bin/env bash
# A soak of kdiag watch: N CLOSE_WAIT and M ESTABLISHED sockets held by
# bench/mksockets, CHURN connections a second opened and closed beside them
# (half through CLOSE_WAIT, see mksockets -churn), and one watch at 1 Hz for
# DURATION. Every SAMPLE it prints the watch's resident memory (VmRSS), its
# peak so far (VmHWM), its CPU time and the machine's load; at the end, the
# growth of the resident memory from the end of WARMUP to the end, and the
# share of a core the watch used. Results go in BENCHMARKS.md ("watch's
# memory").
#
#   bench/soak.sh                         # case D (20,000 + 40,000), 100 conn/s, one hour
#   SHORT=1 bench/soak.sh                 # the same for ten minutes
#   N=1000 M=0 CHURN=20 DURATION=30m bench/soak.sh
#   ARGS='--state close-wait,established --listen 127.0.0.1:19814' bench/soak.sh
#
# ARGS are the watch's flags after --interval 1s --quiet (none: watch's
# defaults). GCTRACE=FILE runs the watch with GODEBUG=gctrace=1 and keeps its
# stderr in FILE; the end then also prints the live heap after the first
# collection past the warm-up and after the last one, which tells growth of
# live objects from growth of the memory the runtime holds around them. As root with unshare and ip, everything runs in network and PID
# namespaces of its own (ISOLATE=0: in the current ones). Needs go and ss.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
M=${M:-40000}
CHURN=${CHURN:-100}
if [ -n "${SHORT:-}" ]; then
  DURATION=${DURATION:-10m}
  WARMUP=${WARMUP:-2m}
else
  DURATION=${DURATION:-60m}
  WARMUP=${WARMUP:-5m}
fi
SAMPLE=${SAMPLE:-10}
ARGS=${ARGS:-}
export N M CHURN DURATION WARMUP SAMPLE ARGS

secs() { # 10m, 1h, 90s, 45 -> seconds
  case $1 in
  *h) echo $((${1%h} * 3600)) ;;
  *m) echo $((${1%m} * 60)) ;;
  *s) echo "${1%s}" ;;
  *) echo "$1" ;;
  esac
}

if [ -z "${KDIAG_BENCH_INNER:-}" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag" ./cmd/kdiag
  go build -o "$tmp/mksockets" ./bench/mksockets
  export BIN=$tmp KDIAG_BENCH_INNER=1 COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"
  if [ "${ISOLATE:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
    exec unshare -n -p -f --mount-proc bash "$0" "$@"
  fi
  exec bash "$0" "$@"
fi

. bench/lib.sh
ip link set lo up 2>/dev/null || true
raise_nofile
dur=$(secs "$DURATION")
warm=$(secs "$WARMUP")
life=$((dur + 600))s
"$BIN/mksockets" -closewait "$N" -established "$M" -churn "$CHURN" -lifetime "$life" >"$BIN/ready" &
holder=$!
watcher=""
cleanup() {
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null || true
  stop_holder
}
trap cleanup EXIT INT TERM
for _ in $(seq 1 900); do
  grep -q READY "$BIN/ready" 2>/dev/null && break
  kill -0 "$holder" 2>/dev/null || { echo "soak: mksockets failed" >&2; exit 1; }
  sleep 0.2
done
grep READY "$BIN/ready" >&2
echo "== kdiag $COMMIT: watch --interval 1s --quiet $ARGS for $DURATION; $N CLOSE_WAIT, $M ESTABLISHED, $CHURN connections/s churned; $(nproc) cores, $(uname -r)" >&2
errf=$BIN/watch.err
godebug=${GODEBUG:-}
if [ -n "${GCTRACE:-}" ]; then
  errf=$GCTRACE
  godebug=gctrace=1${godebug:+,$godebug}
fi
# shellcheck disable=SC2086 # ARGS are flags, split on purpose
GODEBUG=$godebug "$BIN/kdiag" watch --interval 1s --quiet --duration "$DURATION" $ARGS >"$BIN/watch.out" 2>"$errf" &
watcher=$!
tick=$(getconf CLK_TCK)
printf '%8s %10s %10s %10s %8s  %s\n' elapsed "RSS MB" "peak MB" "CPU s" sockets load
start=$SECONDS
warmRSS=""
maxRSS=0
lastCPU=0
while kill -0 "$watcher" 2>/dev/null; do
  sleep "$SAMPLE"
  el=$((SECONDS - start))
  st=/proc/$watcher/status
  [ -r "$st" ] || break
  rss=$(awk '/^VmRSS/ {print $2}' "$st" 2>/dev/null || true)
  hwm=$(awk '/^VmHWM/ {print $2}' "$st" 2>/dev/null || true)
  cpu=$(awk -v t="$tick" '{print ($14 + $15) / t}' "/proc/$watcher/stat" 2>/dev/null || true)
  [ -n "$rss" ] || break
  lastCPU=$cpu
  [ "$rss" -gt "$maxRSS" ] && maxRSS=$rss
  if [ -z "$warmRSS" ] && [ "$el" -ge "$warm" ]; then
    warmRSS=$rss
    warmCPU=$cpu
    warmAt=$el
  fi
  lastRSS=$rss
  lastAt=$el
  printf '%8s %10.1f %10.1f %10.2f %8s  %s\n' "${el}s" "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$cpu" \
    "$(ss -tanH | wc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
done
wait "$watcher" || echo "soak: watch exited $?: $(grep -v '^gc ' "$errf" | tail -3)" >&2
if [ -z "$warmRSS" ]; then
  echo "soak: the watch ended before the warm-up did ($WARMUP)" >&2
  exit 1
fi
echo "== RSS after the warm-up ($warmAt s): $(echo "scale=1; $warmRSS / 1024" | bc) MB; at the end ($lastAt s): $(echo "scale=1; $lastRSS / 1024" | bc) MB; growth $(echo "scale=1; ($lastRSS - $warmRSS) / 1024" | bc) MB; peak $(echo "scale=1; $maxRSS / 1024" | bc) MB (VmHWM $(echo "scale=1; $hwm / 1024" | bc) MB)"
echo "== CPU after the warm-up: $(echo "scale=2; 100 * ($lastCPU - $warmCPU) / ($lastAt - $warmAt)" | bc)% of a core; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${GCTRACE:-}" ]; then
  # gc N @T.Ts P%: ... ms cpu, BEFORE->AFTER->LIVE MB, GOAL MB goal, ...
  awk -v warm="$warmAt" '/^gc [0-9]+ @/ {
      t = substr($3, 2) + 0; split($11, h, "->")
      if (first == "" && t >= warm) { first = h[3]; firstAt = t }
      last = h[3]; lastAt = t; n++
    }
    END { if (n) printf "== live heap after collections: %s MB at %.0f s, %s MB at %.0f s (%d collections)\n", first, firstAt, last, lastAt, n }' "$GCTRACE"
fi
