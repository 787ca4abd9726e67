#!/bin/sh
# Measures what a run history entry costs in Redis (docs/history.md, BENCHMARKS.md).
#
# Usage (from the repository root, after `cargo build --release`):
#
#     tools/history_memory.sh 0      # runs print one short line
#     tools/history_memory.sh 3000   # runs print 3000 more bytes: a full 2 KiB tail
#
# Method: a private redis-server on a free loopback port; 100 CONTINUE jobs; a worker
# (-j 4, history-limit 20) runs them until every job's list holds 20 entries; then
# MEMORY USAGE ... SAMPLES 0 of every history key, and the drop of INFO used_memory
# when all history keys are deleted, divided by the entries they held.
set -e
B=${B:-target/release/redbike}
DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
sleep 0.5
R="redis-cli -p $PORT"
trap '$R shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
export REDBIKE_REDIS_URL="redis://127.0.0.1:$PORT/0" REDBIKE_PREFIX=m REDBIKE_CONFIG=/dev/null
printf '#!/bin/sh\necho "output of $1"\nhead -c %s /dev/zero | tr "\\\\0" x | fold -w 99\n' \
  "${1:-0}" > "$DIR/job.sh"
chmod +x "$DIR/job.sh"
python3 -c 'print("\n".join(f"job{i}:A,CONTINUE" for i in range(100)))' > "$DIR/jobs.csv"
"$B" load "$DIR/jobs.csv" > /dev/null
"$B" work A -j 4 --history-limit 20 -- "$DIR/job.sh" 2>/dev/null &
W=$!
FULL='local n=0 for _,k in ipairs(redis.call("keys","m-history-*")) do
  if redis.call("llen",k)>=20 then n=n+1 end end return n'
while [ "$($R eval "$FULL" 0)" -lt 100 ]; do sleep 1; done
"$B" control HALT
wait $W || true
used() { $R info memory | grep '^used_memory:' | cut -d: -f2 | tr -d '\r'; }
hist=0
entries=0
for k in $($R keys 'm-history-*'); do
  hist=$((hist + $($R memory usage "$k" samples 0)))
  entries=$((entries + $($R llen "$k")))
done
recent=$($R memory usage m-recent-runs samples 0)
rn=$($R llen m-recent-runs)
one=$($R lindex m-history-job1:A 0 | wc -c)
before=$(used)
$R eval 'for _,k in ipairs(redis.call("keys","m-history-*")) do redis.call("del",k) end
  redis.call("del","m-recent-runs","m-recent-failures","m-runs-per-minute","m-due")
  return 1' 0 > /dev/null
after=$(used)
echo "output ${1:-0} bytes: entry JSON $((one - 1)) bytes"
echo "per-job lists: $entries entries, $((hist / entries)) bytes each (MEMORY USAGE)"
echo "recent runs: $rn entries, $((recent / rn)) bytes each (MEMORY USAGE)"
echo "used_memory drop: $((before - after)) bytes for $((entries + rn)) entries," \
  "$(((before - after) / (entries + rn))) bytes each"
