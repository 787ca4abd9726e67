-- resume: `redbike resume`: end a job's pause and place it per its schedule from now
-- (the caller computed the placement from the schedule it read; occurrences missed
-- while paused are not run), exactly as place.lua places a `set`.
-- A run asked while it was paused (`redbike run` queued it with a `rerun` marker) goes
-- first: the job stays in its queue, the marker goes (it only let claims take a paused
-- job), and the worker that runs it places it per its schedule afterwards.
-- The operator's audit entry (audit in common.lua) goes to the event stream when the
-- script changed something.
-- KEYS: schedules, statuses, timeline, queue, members, lease, paused, rerun, events
-- ARGV: jobid, schedule read ("\0" = none), stored schedule, action
--       (enqueue|timeline|stop), due, now, queue wake channel, timeline wake channel,
--       schedule stored instead when it is running (see place.lua), then the audit
--       entry (8)
-- Returns "not-paused" (nothing was changed), "changed" when the schedule is no longer
-- the one read (the caller reads again), "asked" (the asked run stays queued), else the
-- placement's result.
local k = job_keys()
local jobid = ARGV[1]
local bad = wrong_job_type(k, {KEYS[7], "hash", KEYS[8], "hash"})
  or (ARGV[4] == "timeline" and bad_number(ARGV[5], 0, MAX_UNIX, "due time"))
if bad then
  return bad
end
if redis.call("HEXISTS", KEYS[7], jobid) == 0 then
  return "not-paused"
end
if (redis.call("HGET", k.schedules, jobid) or "\0") ~= ARGV[2] then
  return "changed"
end
redis.call("HDEL", KEYS[7], jobid)
audit(KEYS[9], 10)
if redis.call("HEXISTS", KEYS[8], jobid) == 1 and redis.call("SISMEMBER", k.members, jobid) == 1 then
  redis.call("HDEL", KEYS[8], jobid)
  return "asked"
end
return place_and_store(k, jobid, ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[3],
  ARGV[9])
