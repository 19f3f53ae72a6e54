#!/usr/bin/env bash
# What serving metrics costs kdiag watch: the CPU (user + system, GNU
# time) and peak RSS of a watch --listen at 1 Hz for DURATION, scraped every
# second by curl, against the same watch not scraped, alternating, RUNS
# times each, beside N CLOSE_WAIT and M ESTABLISHED sockets held by
# bench/mksockets. Prints one row per run and the medians, with the load.
# Results go in BENCHMARKS.md ("scraping").
#
#   bench/scrape.sh                                   # case D, --state close-wait,established
#   ARGS='--state close-wait,established --events off' bench/scrape.sh
#   N=1000 M=0 DURATION=30s RUNS=3 bench/scrape.sh
#
# As root with unshare and ip, everything runs in network and PID
# namespaces of its own (ISOLATE=0: in the current ones). Needs go, curl
# and GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
M=${M:-40000}
RUNS=${RUNS:-3}
DURATION=${DURATION:-30s}
ARGS=${ARGS:---state close-wait,established}
PORT=${PORT:-19813}
export N M RUNS DURATION ARGS PORT
command -v curl >/dev/null || { echo "bench/scrape.sh: needs curl" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/scrape.sh: needs GNU time (apt-get install -y time)" >&2; exit 1; }

if [ -z "${KDIAG_BENCH_INNER:-}" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if [ -z "${KDIAG:-}" ]; then
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag" ./cmd/kdiag
    KDIAG=$tmp/kdiag
  fi
  go build -o "$tmp/mksockets" ./bench/mksockets
  export KDIAG BIN=$tmp KDIAG_BENCH_INNER=1 COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"
  if [ "${ISOLATE:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
    exec unshare -n -p -f --mount-proc bash "$0" "$@"
  fi
  exec bash "$0" "$@"
fi

. bench/lib.sh
trap stop_holder EXIT INT TERM
ip link set lo up 2>/dev/null || true
raise_nofile
hold_sockets "$BIN/mksockets" "$BIN" "$N" "$M" 20m
secs=${DURATION%s}
echo "== kdiag $COMMIT: watch --interval 1s --quiet --listen 127.0.0.1:$PORT $ARGS, ${DURATION} a run; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# one SCRAPED: a watch run; prints "cpu_s rss_mb scrapes load".
one() {
  local scraped=$1 scrapes=0
  # shellcheck disable=SC2086 # ARGS are flags, split on purpose
  /usr/bin/time -f '%U %S %M' -o "$BIN/time" "$KDIAG" watch --interval 1s --quiet --duration "$DURATION" \
    --listen "127.0.0.1:$PORT" $ARGS >/dev/null 2>"$BIN/err" &
  local w=$!
  if [ "$scraped" = 1 ]; then
    sleep 1
    local end=$((SECONDS + secs - 2))
    while [ $SECONDS -lt $end ]; do
      curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics" && scrapes=$((scrapes + 1))
      sleep 1
    done
  fi
  wait "$w" || true
  read -r u s m <"$BIN/time"
  echo "$(echo "$u + $s" | bc) $((m / 1024)) $scrapes $(cut -d' ' -f1 /proc/loadavg)"
}

printf '%-4s %-10s %8s %8s %8s %s\n' run watch "CPU s" "CPU %" "RSS MB" "scrapes load"
plain=() scraped=()
for r in $(seq 1 "$RUNS"); do
  for k in 0 1; do
    [ $((r % 2)) = 0 ] && k=$((1 - k)) # alternate which goes first
    read -r cpu rss n load < <(one "$k")
    pct=$(echo "scale=1; 100 * $cpu / $secs" | bc)
    if [ "$k" = 1 ]; then
      scraped+=("$cpu")
      printf '%-4s %-10s %8s %8s %8s %s\n' "$r" scraped "$cpu" "$pct" "$rss" "$n $load"
    else
      plain+=("$cpu")
      printf '%-4s %-10s %8s %8s %8s %s\n' "$r" unscraped "$cpu" "$pct" "$rss" "- $load"
    fi
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mp=$(median "${plain[@]}") ms=$(median "${scraped[@]}")
echo "== median CPU: unscraped $mp s ($(echo "scale=1; 100 * $mp / $secs" | bc)%), scraped $ms s ($(echo "scale=1; 100 * $ms / $secs" | bc)%): scraped/unscraped $(echo "scale=2; $ms / $mp" | bc); load $(cut -d' ' -f1-3 /proc/loadavg)"
