#!/usr/bin/env bash
# Quick start: build redbike, start a private redis-server, set a few example jobs,
# and run a dispatcher and a worker for QUICKSTART_SECONDS (default 20), then show the
# statuses and stop everything. Touches no other Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${QUICKSTART_SECONDS:-20}

# A fresh machine lacks redis-server: install it as .ci/run does (the service the
# package starts is not used; a private server is started below).
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing it (apt-get install redis-server)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq && $sudo apt-get install -y -qq redis-server
fi
# cargo shows its own progress: the first build takes a few minutes.
echo "building redbike (release)"
cargo build --release
bin=$PWD/target/release/redbike
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# AOF on, as "Redis settings redbike needs" in docs/operating.md asks (no warning at start).
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly yes --dir "$dir" --daemonize yes --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

export REDBIKE_REDIS_URL="redis://127.0.0.1:$port/0" REDBIKE_PREFIX=quickstart
cd "$dir"
"$bin" set "every5:A" "FREQ=SECONDLY;INTERVAL=5"
"$bin" set "once:A" NOW
"$bin" set "poll:B" CONTINUE
"$bin" set "flaky:A" "FREQ=SECONDLY;INTERVAL=2"
"$bin" dispatch & pids+=($!)
"$bin" work A:A:B -j 2 -- "$OLDPWD/contrib/example-job.sh" & pids+=($!)
sleep "$seconds"
"$bin" control HALT
wait "${pids[@]}"
pids=()
echo "--- statuses (JOBID,EVENT,TIMESTAMP) ---"
"$bin" statuses
echo "--- tell every5:A ---"
"$bin" tell every5:A
echo "--- stats ---"
"$bin" stats --queues A:B
