-- skip: the dispatcher skips a late occurrence of a job in a `catch-up = "skip"` queue:
-- the job moves to its next occurrence on the timeline (or leaves it, for a one-off or
-- an exhausted rule), and the skip is recorded as status SKP and last failure SKP. The
-- next occurrence was computed from the schedule the dispatcher read, so nothing is
-- written unless the job is still due at that score with that schedule (a `set` or a
-- dispatcher meanwhile wins).
-- The skip leaves the history entry it is given, made in Rust (see record_entry), and
-- its run event (record_run; not `failed`: the skip is not the job's failure).
-- KEYS: timeline, statuses, failures, schedules, history, recent runs, recent
--       failures, due, events
-- ARGV: jobid, score read, schedule read, "timeline" or "stop", next run (or 0), now,
--       history entry ("" = none), history limit ("0": no history), recent runs kept,
--       recent failures kept, events kept ("0": none)
-- Returns "skipped" or "changed".
local timeline, statuses, failures, schedules = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobid, action = ARGV[1], ARGV[4]
local bad = wrong_type({timeline, "zset", statuses, "hash", failures, "hash",
  schedules, "hash"})
  or bad_number(ARGV[5], 0, MAX_UNIX, "next run")
  or bad_number(ARGV[6], 0, MAX_UNIX, "now")
  or bad_number(ARGV[8], 0, 1000000, "history limit")
  or bad_number(ARGV[9], 1, 1000000, "recent runs kept")
  or bad_number(ARGV[10], 1, 1000000, "recent failures kept")
  or bad_number(ARGV[11], 0, 10000000, "events kept")
if bad then
  return bad
end
if action ~= "timeline" and action ~= "stop" then
  return redis.error_reply("ERR unknown skip action " .. tostring(action) ..
    "; nothing was changed")
end
local score = redis.call("ZSCORE", timeline, jobid)
if not score or tonumber(score) ~= tonumber(ARGV[2])
    or redis.call("HGET", schedules, jobid) ~= ARGV[3] then
  return "changed"
end
if action == "timeline" then
  redis.call("ZADD", timeline, ARGV[5], jobid)
else
  redis.call("ZREM", timeline, jobid)
end
redis.call("HSET", statuses, jobid, "SKP:" .. ARGV[6])
redis.call("HSET", failures, jobid, "SKP:" .. ARGV[6])
record_run({history = KEYS[5], recent_runs = KEYS[6], recent_failures = KEYS[7],
  due = KEYS[8]}, jobid, ARGV[7], ARGV[8], ARGV[9], ARGV[10], false, {KEYS[9], ARGV[11]},
  "0")
return "skipped"
