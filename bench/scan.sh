#!/usr/bin/env bash
# Times `kdiag scan --state close-wait -o json` (every socket, as ss lists
# them) and `kdiag scan --state close-wait` (its default table) against
# `ss -tanp state close-wait` on N CLOSE_WAIT and M ESTABLISHED sockets held by several
# processes on 127.0.0.x, in the same run, alternating, with medians and peak
# RSS (getrusage of each run). Results go in BENCHMARKS.md.
#
#   bench/scan.sh                          # N=1000 M=0
#   N=20000 M=40000 bench/scan.sh          # the large size
#   RUNS=9 KDIAG=/usr/local/bin/kdiag bench/scan.sh
#
# As root (with unshare and ip) the sockets live in a private network
# namespace, so nothing else on the host adds to or takes from them; both
# tools run inside it. kdiag then also dumps the host's namespace (it sees
# every namespace its processes live in, ss only its own): that costs kdiag,
# not ss. NETNS=0 runs in the current namespace.
#
# kdiag is built with -trimpath -ldflags="-s -w" unless KDIAG is given: a
# stripped binary maps about 5 MB less of itself (see BENCHMARKS.md).
#
# Needs: go, ss (iproute2). Every process it starts is stopped on exit (trap),
# and the socket holders stop by themselves after LIFETIME anyway.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000}
M=${M:-0}
RUNS=${RUNS:-7}
LIFETIME=${LIFETIME:-10m}
export N M RUNS LIFETIME

if [ -z "${KDIAG_BENCH_INNER:-}" ]; then
  command -v ss >/dev/null || { echo "bench/scan.sh: needs ss (apt-get install -y iproute2)" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if [ -z "${KDIAG:-}" ]; then
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/kdiag" ./cmd/kdiag
    KDIAG=$tmp/kdiag
  fi
  go build -o "$tmp/mksockets" ./bench/mksockets
  go build -o "$tmp/scanbench" ./bench/scanbench
  export KDIAG BIN=$tmp KDIAG_BENCH_INNER=1
  if [ "${NETNS:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
    unshare -n bash "$0"
  else
    bash "$0"
  fi
  exit
fi

# Inner part: in the namespace the sockets live in.
. bench/lib.sh
trap stop_holder EXIT INT TERM
if [ "$(ip -o link show lo 2>/dev/null | grep -c 'state DOWN\|state UNKNOWN' || true)" != 0 ]; then
  ip link set lo up 2>/dev/null || true
fi

echo "== holding $N CLOSE_WAIT and $M ESTABLISHED sockets" >&2
hold_sockets "$BIN/mksockets" "$BIN" "$N" "$M" "$LIFETIME"

# What both tools should see, and whether kdiag attributes all of it.
cw=$(ss -tanH state close-wait | wc -l)
est=$(ss -tanH state established | wc -l)
attributed=$("$KDIAG" scan --state close-wait -o json 2>/dev/null | grep -c '"state":"CLOSE_WAIT".*"pid":[1-9]' || true)
echo "== kernel: $cw CLOSE_WAIT, $est ESTABLISHED; kdiag attributed $attributed CLOSE_WAIT" >&2
echo "== machine: $(nproc) cores, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$BIN/scanbench" -runs "$RUNS" -label "N=$N M=$M" \
  "$KDIAG scan --state close-wait -o json" \
  "$KDIAG scan --state close-wait" \
  "ss -tanp state close-wait"
echo "== after: load $(cut -d' ' -f1-3 /proc/loadavg), $(ss -tanH state close-wait | wc -l) CLOSE_WAIT" >&2
