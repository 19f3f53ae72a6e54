#!/bin/sh
# capture.sh PID N INTERVAL: N samples of every thread of PID, in the fixture
# format clients/testdata/threads/*.txt uses.
pid=$1; n=${2:-5}; every=${3:-1}
i=1
while [ $i -le $n ]; do
  echo "== sample $i"
  for d in /proc/$pid/task/*; do
    tid=${d##*/}
    for f in comm stat syscall wchan; do
      v=$(cat $d/$f 2>/dev/null) || continue
      printf '%s %s: %s\n' "$tid" "$f" "$v"
    done
  done
  i=$((i+1))
  [ $i -le $n ] && sleep $every
done
