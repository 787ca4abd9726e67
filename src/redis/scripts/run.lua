-- run: `redbike run`: run a job once as soon as a worker is free, keeping its schedule.
-- Not queued, not running (on the timeline, stopped, held): it moves into its queue now
-- with the original's enqueue rule and status ENQ, and the worker that runs it puts it
-- back per its schedule afterwards. A one-off waiting on the timeline (schedule STOP)
-- keeps its occurrence: its schedule becomes AT:TS, which the worker applies after the
-- run. Already queued: nothing changes. Running (its lease exists): a marker in `rerun`
-- (Redis's clock) asks the worker that finishes this run to queue it once more
-- (finish.lua). Paused: as above, and the marker also lets our claim run it although
-- it is paused (claim.lua); it stays paused.
-- The operator's audit entry (audit in common.lua) goes to the event stream when the
-- script changed something.
-- KEYS: schedules, statuses, timeline, queue, members, lease, paused, rerun, control,
--       events
-- ARGV: jobid, now, queue wake channel, then the audit entry (8)
-- Returns {result, halted 0/1, paused 0/1}: result "unknown" (no schedule; nothing was
-- written), "queued", "running" or "enqueued".
local k = job_keys()
local jobid, now = ARGV[1], ARGV[2]
local paused_key, rerun = KEYS[7], KEYS[8]
local bad = wrong_job_type(k, {paused_key, "hash", rerun, "hash", KEYS[9], "string"})
if bad then
  return bad
end
local halted = redis.call("GET", KEYS[9]) == "HALT" and 1 or 0
local schedule = redis.call("HGET", k.schedules, jobid)
if not schedule then
  return {"unknown", halted, 0}
end
local paused = redis.call("HEXISTS", paused_key, jobid) == 1
local p = paused and 1 or 0
local marker = string.format("%.6f", redis_time())
if redis.call("EXISTS", k.lease) == 1 then
  redis.call("HSET", rerun, jobid, marker)
  audit(KEYS[10], 4)
  return {"running", halted, p}
end
if redis.call("SISMEMBER", k.members, jobid) == 1 then
  if paused then
    redis.call("HSET", rerun, jobid, marker)
    audit(KEYS[10], 4)
  end
  return {"queued", halted, p}
end
if schedule == "STOP" then
  local due = redis.call("ZSCORE", k.timeline, jobid)
  if due then
    redis.call("HSET", k.schedules, jobid, string.format("AT:%d", tonumber(due)))
  end
end
k.lease_gone = true
local result = place(k, jobid, "enqueue", 0, now, ARGV[3], "")
if paused then
  redis.call("HSET", rerun, jobid, marker)
end
audit(KEYS[10], 4)
return {result, halted, p}
