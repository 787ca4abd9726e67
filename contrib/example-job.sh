#!/bin/sh
# An example job for `redbike work`: the job id comes as the last argument.
# Exit 0 = success (write whole seconds to $REDBIKE_BACKOFF_FILE to back off a CONTINUE
# job), 100 = stop, 101 = unset, anything else = failure.
echo "running $1 (queue $REDBIKE_QUEUE, schedule $REDBIKE_SCHEDULE)"
case "$1" in
  poll*) echo 3 > "$REDBIKE_BACKOFF_FILE" ;;  # CONTINUE, every ~3 s
  # Runs every 2 s, on even seconds: fail every other run (the seconds / 2 are odd).
  flaky*) [ $(( $(date +%s) / 2 % 2 )) -eq 0 ] || { echo "failing this time" >&2; exit 1; } ;;
esac
