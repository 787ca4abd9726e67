#!/bin/bash
# Measures what each job costs Redis when the CLI drains queued no-op jobs, and which
# commands it goes to (benches/HISTORY.md, issue 34's CLI figure).
#
# Usage (from the repository root, after `cargo build --release`):
#
#     tools/redis_cost.sh [N] [J]        # default 10,000 NOW jobs at -j 8
#     B=/path/to/other/redbike tools/redis_cost.sh   # another build, to alternate
#
# Method: a private redis-server on a free loopback port; `redbike load` of N NOW jobs
# of queue A; CONFIG RESETSTAT; `redbike work A -j J -- /bin/true` until the queue and
# the running index are empty (at most 10 minutes); then redis-server's CPU (INFO cpu,
# user + sys) and INFO commandstats over the drain, divided by N. Commands called
# from scripts are counted inside their EVALSHA's time too.
set -e
B=${B:-target/release/redbike}
N=${1:-10000}
J=${2:-8}
DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  [ -n "$W" ] && kill "$W" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --dir "$DIR" --logfile "$DIR/redis.log" >/dev/null
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
URL=redis://127.0.0.1:$PORT
python3 -c "
import sys
with open('$DIR/jobs.csv', 'w') as f:
    for i in range($N):
        f.write('j%d:A,NOW\n' % i)
"
"$B" --redis-url "$URL" --prefix t load "$DIR/jobs.csv" >/dev/null 2>&1
redis-cli -p "$PORT" config resetstat >/dev/null
cpu() { redis-cli -p "$PORT" info cpu | awk -F: '/used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }
cpu0=$(cpu)
t0=$(date +%s.%N)
"$B" --redis-url "$URL" --prefix t -q work A -j "$J" -- /bin/true 2>/dev/null &
W=$!
for _ in $(seq 3000); do
  [ "$(redis-cli -p "$PORT" llen t-work-A)" = 0 ] && [ "$(redis-cli -p "$PORT" zcard t-leases)" = 0 ] && break
  sleep 0.2
done
t1=$(date +%s.%N)
cpu1=$(cpu)
redis-cli -p "$PORT" info commandstats | grep '^cmdstat_' > "$DIR/stats.txt"
redis-cli -p "$PORT" set t-control HALT >/dev/null
wait "$W" || true
W=
python3 - "$N" "$cpu0" "$cpu1" "$t0" "$t1" "$DIR/stats.txt" <<'PY'
import re, sys
n, cpu0, cpu1, t0, t1 = int(sys.argv[1]), *map(float, sys.argv[2:6])
rows = []
for line in open(sys.argv[6]):
    name, rest = line.strip()[len("cmdstat_"):].split(":", 1)
    f = dict(kv.split("=") for kv in rest.split(","))
    rows.append((float(f["usec"]) / n, name, int(f["calls"]) / n, float(f["usec_per_call"])))
print("redis-server CPU %.1f µs a job, %.0f jobs/s, %.2f commands a job" % (
    (cpu1 - cpu0) * 1e6 / n, n / (t1 - t0), sum(r[2] for r in rows)))
for us, name, calls, per_call in sorted(rows, reverse=True)[:15]:
    print("  %-10s %6.3f calls a job  %8.2f µs a call  %6.2f µs a job" % (name, calls, per_call, us))
PY
