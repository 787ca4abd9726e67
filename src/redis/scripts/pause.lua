-- pause: `redbike pause`: keep a job's schedule but take it off the timeline and out of
-- its queue, record the pause (JSON made by the caller) and status PAU. A running job
-- finishes; its worker then does not place it (finish.lua). A one-off's pending run
-- stays in its schedule for `resume`: STOP on the timeline becomes AT:TS, STOP in its
-- queue NOW. A run asked before the pause (`rerun`) is cancelled by it.
-- The operator's audit entry (audit in common.lua) goes to the event stream when the
-- script changed something.
-- KEYS: schedules, statuses, timeline, queue, members, lease, paused, rerun, events
-- ARGV: jobid, pause entry (JSON), now, then the audit entry (8)
-- Returns "unknown" (no schedule; nothing was written), "already" (paused before;
-- nothing was changed), "running" (paused while it runs) or "paused".
local k = job_keys()
local jobid, entry, now = ARGV[1], ARGV[2], ARGV[3]
local paused_key, rerun = KEYS[7], KEYS[8]
local bad = wrong_job_type(k, {paused_key, "hash", rerun, "hash"})
if bad then
  return bad
end
local schedule = redis.call("HGET", k.schedules, jobid)
if not schedule then
  return "unknown"
end
if redis.call("HEXISTS", paused_key, jobid) == 1 then
  return "already"
end
local due = redis.call("ZSCORE", k.timeline, jobid)
local queued = redis.call("SISMEMBER", k.members, jobid) == 1
if schedule == "STOP" then
  if due then
    redis.call("HSET", k.schedules, jobid, string.format("AT:%d", tonumber(due)))
  elseif queued then
    redis.call("HSET", k.schedules, jobid, "NOW")
  end
end
redis.call("ZREM", k.timeline, jobid)
dequeue(k.queue, k.members, jobid)
redis.call("HSET", paused_key, jobid, entry)
redis.call("HDEL", rerun, jobid)
audit(KEYS[9], 4)
if redis.call("EXISTS", k.lease) == 1 then
  -- Its status stays WRK while it runs: it tells finish.lua and recover.lua that the
  -- run in hand is a one-off's (oneoff_action), whose pending run a cut-short run keeps
  -- for `resume`. The run's end writes PAU.
  return "running"
end
set_status(k.statuses, jobid, "PAU", now)
return "paused"
