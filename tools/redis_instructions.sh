#!/bin/bash
# What a job costs Redis, in instructions (callgrind), for two builds of the scripts
# compared on one and the same drain (BENCHMARKS.md, issue 34): unlike CPU time, the
# count is the same run after run, whatever else the machine does.
#
#     tools/redis_instructions.sh capture BIN N J OUT
#         a private redis-server; `BIN load` of N NOW jobs of queue A, saved as OUT.rdb;
#         MONITOR of `BIN work A -j J -- /bin/true` until the queue and the running
#         index are empty, as OUT.mon
#     tools/redis_instructions.sh replay OUT CAPTURED_SCRIPTS SCRIPTS N
#         redis-server under callgrind from OUT.rdb, SCRIPTS loaded, the capture's
#         commands replayed (tools/redis_replay.py: each script call with SCRIPTS'
#         script of the same name); prints redis-server's instructions per job (N jobs);
#         KEEP=FILE also keeps callgrind's output there, for callgrind_annotate
#
# CAPTURED_SCRIPTS holds the scripts of the build that made the capture, SCRIPTS those
# of the build to measure, each as Redis gets them: from a build's bench program,
# `cargo bench --bench bench -- --scripts DIR` (since 2026-11-28; before, the build's
# src/redis/scripts, e.g. `git archive REV src/redis/scripts | tar x -C DIR`). Both must
# lay out their arguments alike. RS names another redis-server.
set -e
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_up() {
  for _ in $(seq 300); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "redis-server did not start" >&2
  exit 1
}
case "$1" in
capture)
  B=$2 N=$3 J=$4 OUT=$5
  DIR=$(mktemp -d)
  PORT=$(free_port)
  "${RS:-redis-server}" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$DIR" --daemonize yes --logfile "$DIR/log" >/dev/null
  wait_up "$PORT"
  trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1; rm -rf "$DIR"' EXIT
  URL=redis://127.0.0.1:$PORT
  python3 -c "
with open('$DIR/jobs.csv', 'w') as f:
    for i in range($N):
        f.write('j%d:A,NOW\n' % i)
"
  "$B" --redis-url "$URL" --prefix t load "$DIR/jobs.csv" >/dev/null
  redis-cli -p "$PORT" save >/dev/null
  cp "$DIR/dump.rdb" "$OUT.rdb"
  redis-cli -p "$PORT" monitor >"$OUT.mon" &
  M=$!
  sleep 0.3
  "$B" --redis-url "$URL" --prefix t -q work A -j "$J" -- /bin/true 2>/dev/null &
  W=$!
  for _ in $(seq 3000); do
    [ "$(redis-cli -p "$PORT" llen t-work-A)" = 0 ] &&
      [ "$(redis-cli -p "$PORT" zcard t-leases)" = 0 ] && break
    sleep 0.2
  done
  sleep 0.5
  kill "$W" "$M"
  wait "$W" "$M" 2>/dev/null || true
  echo "captured $(grep -vc '\[0 lua\]' "$OUT.mon") commands in $OUT.mon"
  ;;
replay)
  OUT=$2 OLD=$3 NEW=$4 N=$5
  DIR=$(mktemp -d)
  cp "$OUT.rdb" "$DIR/dump.rdb"
  PORT=$(free_port)
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$DIR/cg.out" \
    "${RS:-redis-server}" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$DIR" >"$DIR/valgrind.log" 2>&1 &
  VG=$!
  trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1; rm -rf "$DIR"' EXIT
  wait_up "$PORT"
  for f in "$NEW"/*.lua; do
    [ "$(basename "$f")" = common.lua ] && continue
    redis-cli -p "$PORT" -x script load <<<"$(cat "$NEW/common.lua" "$f")" >/dev/null
  done
  callgrind_control -i on "$VG" >/dev/null 2>&1
  python3 "$(dirname "$0")/redis_replay.py" "$OUT.mon" "$OLD" "$NEW" "$PORT"
  callgrind_control -i off "$VG" >/dev/null 2>&1
  echo "left: $(redis-cli -p "$PORT" llen t-work-A) queued, $(redis-cli -p "$PORT" zcard t-leases) running"
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$VG" || true
  [ -n "$KEEP" ] && cp "$DIR/cg.out" "$KEEP"
  total=$(callgrind_annotate "$DIR/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  python3 -c "print(f'redis-server: {$total / $N:,.0f} instructions a job')"
  ;;
*)
  sed -n '2,18p' "$0"
  exit 2
  ;;
esac
