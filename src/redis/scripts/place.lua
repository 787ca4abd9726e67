-- set/load: store a schedule and place the job.
-- KEYS: schedules, statuses, timeline, queue, members, lease
-- ARGV: jobid, stored schedule, action (enqueue|timeline|stop), due, now,
--       queue wake channel, timeline wake channel, schedule stored instead when the
--       job cannot be queued because it is running (NOW: the worker that finishes it
--       applies NOW, queueing it once more, as the Python original would too)
local k = job_keys()
local jobid = ARGV[1]
local bad = wrong_type({k.schedules, "hash", k.statuses, "hash", k.timeline, "zset",
  k.queue, "list", k.members, "set", k.lease, "string"})
  or (ARGV[3] == "timeline" and bad_number(ARGV[4], 0, MAX_UNIX, "due time"))
if bad then
  return bad
end
local result = place(k, jobid, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
if result == "running" then
  redis.call("HSET", k.schedules, jobid, ARGV[8])
else
  redis.call("HSET", k.schedules, jobid, ARGV[2])
end
return result
