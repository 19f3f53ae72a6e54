# Shared by bench/scan.sh and scripts/bench-watch.sh: source it, then
#
#   hold_sockets MKSOCKETS DIR N M LIFETIME
#
# starts bench/mksockets holding N CLOSE_WAIT and M ESTABLISHED sockets
# (and, with CHURN set, churning that many connections a second), sets
# $holder to its pid, waits (at most READY_WAIT seconds, 180 by default)
# until it prints READY, and
# echoes that line to stderr. stop_holder stops it; call it from the
# caller's EXIT trap. mksockets stops by itself after LIFETIME anyway.
# With HOLDER_NAME set (e.g. java), the holders run as a copy of mksockets
# of that name: kdiag takes processes named java for JVMs and looks for a
# kafka-clients jar among their open files.

holder=""

hold_sockets() {
  local bin=$1 dir=$2 n=$3 m=$4 lifetime=$5
  if [ -n "${HOLDER_NAME:-}" ]; then
    mkdir -p "$dir/as"
    cp "$bin" "$dir/as/$HOLDER_NAME"
    bin=$dir/as/$HOLDER_NAME
  fi
  "$bin" -closewait "$n" -established "$m" -lifetime "$lifetime" ${CHURN:+-churn "$CHURN"} >"$dir/ready" &
  holder=$!
  for _ in $(seq 1 "$((${READY_WAIT:-180} * 5))"); do
    grep -q READY "$dir/ready" 2>/dev/null && break
    kill -0 "$holder" 2>/dev/null || { echo "$0: mksockets failed" >&2; return 1; }
    sleep 0.2
  done
  grep READY "$dir/ready" >&2 || { echo "$0: mksockets not ready after ${READY_WAIT:-180} s" >&2; return 1; }
}

stop_holder() {
  if [ -n "$holder" ] && kill -0 "$holder" 2>/dev/null; then
    kill -TERM "$holder" 2>/dev/null || true
    wait "$holder" 2>/dev/null || true
  fi
}

# raise_nofile sets the shell's soft open-file limit to its hard limit, so
# that the tools it starts may hold as many descriptors as the machine
# allows (ss -p and kdiag open one per directory they read at a time; the
# socket holders raise their own).
raise_nofile() {
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
}
