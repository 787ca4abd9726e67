-- resume: `redbike resume`: end a job's pause and place it per its schedule from now
-- (the caller computed the placement from the schedule it read; occurrences missed
-- while paused are not run), exactly as place.lua places a `set`.
-- KEYS: schedules, statuses, timeline, queue, members, lease, paused
-- ARGV: jobid, schedule read ("\0" = none), stored schedule, action
--       (enqueue|timeline|stop), due, now, queue wake channel, timeline wake channel,
--       schedule stored instead when it is running (see place.lua)
-- Returns "not-paused" (nothing was changed), "changed" when the schedule is no longer
-- the one read (the caller reads again), else the placement's result.
local k = job_keys()
local jobid = ARGV[1]
local bad = wrong_type({k.schedules, "hash", k.statuses, "hash", k.timeline, "zset",
  k.queue, "list", k.members, "set", k.lease, "string", KEYS[7], "hash"})
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
local result = place(k, jobid, ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
if result == "running" then
  redis.call("HSET", k.schedules, jobid, ARGV[9])
else
  redis.call("HSET", k.schedules, jobid, ARGV[3])
end
return result
