#!/usr/bin/env bash
# Measures what `kdiag watch` costs at 1 Hz (with its default --events auto,
# which as root gates the scans by the kernel's TCP state changes, and with
# --events off): the CPU time (getrusage of the
# watch process: user + system) over DURATION, with N CLOSE_WAIT and M
# ESTABLISHED sockets held by bench/mksockets (the scan benchmark's socket
# generator), for each watch configuration below. Results go in
# BENCHMARKS.md, section "watch".
#
#   scripts/bench-watch.sh                          # N=20000 M=40000, 60 s
#   N=1000 M=0 DURATION=30s scripts/bench-watch.sh
#
# Needs go and python3 (for getrusage of the child). Everything it starts
# stops on exit, and mksockets stops by itself after LIFETIME anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
# Run in network and pid namespaces of our own (root): mksockets'
# 127.0.0.x:9092 listeners cannot clash with another run's, and kdiag sees
# (and pays for) only our processes and sockets, not whatever else the host
# runs. ISOLATE=0 measures on the host as it is.
if [ -z "${IN_NETNS:-}" ] && [ "${ISOLATE:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
  exec unshare -n -p -f --mount-proc env IN_NETNS=1 bash -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
fi
N=${N:-20000} M=${M:-40000} DURATION=${DURATION:-60s} LIFETIME=${LIFETIME:-15m}
tmp=$(mktemp -d)
. bench/lib.sh
cleanup() {
  stop_holder
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
CGO_ENABLED=0 go build -o "$tmp/kdiag" ./cmd/kdiag
go build -o "$tmp/mksockets" ./bench/mksockets
# EXISTING=1 measures against the sockets already on the host (e.g. those
# of a bench/scan.sh run in progress) instead of starting mksockets.
if [ -z "${EXISTING:-}" ]; then
  hold_sockets "$tmp/mksockets" "$tmp" "$N" "$M" "$LIFETIME"
fi
N=$(ss -tanH state close-wait | wc -l) M=$(ss -tanH state established | wc -l)
echo "== kernel: $N CLOSE_WAIT, $M ESTABLISHED" >&2
echo "== machine: $(nproc) cores, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" >&2

# run LABEL ARGS...: one watch run of DURATION at 1 Hz; prints CPU % of one core.
run() {
  local label=$1; shift
  python3 - "$DURATION" "$label" "$tmp/kdiag" watch --interval 1s --duration "$DURATION" --quiet "$@" <<'PY'
import resource, subprocess, sys, time
dur, label, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
t0 = time.monotonic()
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
first = p.stdout.splitlines()[0] if p.stdout else p.stderr.strip()
print(f"{label}: cpu {cpu:.2f}s (user {ru.ru_utime:.2f} sys {ru.ru_stime:.2f}) over {wall:.1f}s wall = {100*cpu/wall:.1f}% of one core; peak RSS {ru.ru_maxrss/1024:.0f} MB; exit {p.returncode}; {first}")
PY
}
# PROFILE=FILE writes the first run's CPU profile (go tool pprof kdiag FILE).
run "watch --state close-wait,established (N=$N M=$M)" --state close-wait,established ${PROFILE:+--cpuprofile "$PROFILE"}
run "watch --state close-wait (N=$N M=$M)" --state close-wait
# The same without the kernel's state-change events (what a watch that is
# not root, or --events off, costs): every scan dumps.
run "watch --state close-wait,established --events off" --state close-wait,established --events off
run "watch --state close-wait --events off" --state close-wait --events off
# scraped LABEL ARGS...: a run with --listen, its metrics scraped every
# second meanwhile. Each scrape is a TCP connection on 127.0.0.1, whose state
# changes wake an --events watch unless its query leaves them out (--port).
scraped() {
  local label=$1; shift
  run "$label" --listen 127.0.0.1:19813 "$@" &
  local w=$!
  sleep 2
  local end=$((SECONDS + ${DURATION%s} - 3))
  while [ $SECONDS -lt $end ]; do curl -s -o /dev/null http://127.0.0.1:19813/metrics 2>/dev/null || python3 -c 'import urllib.request;urllib.request.urlopen("http://127.0.0.1:19813/metrics").read()' 2>/dev/null || true; sleep 1; done
  wait $w
}
scraped "watch --state close-wait,established --listen (scraped 1/s)" --state close-wait,established
scraped "watch --state close-wait,established --port 9092 --listen (scraped 1/s)" --state close-wait,established --port 9092
