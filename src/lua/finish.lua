-- finish: record a run's outcome and put the job back per its schedule, atomically.
-- Only the lease holder reschedules (as in the original), so an unset or set made while
-- the job ran wins; but a job whose lease merely expired, and that is nowhere else, is
-- still put back so that it never falls out of circulation.
-- KEYS: schedules, statuses, timeline, queue, members, lease, failures, leases
-- ARGV: jobid, tag, expected schedule ("\0" = none), mode (place|unset|hold|bad),
--       action, due, now, schedule to store ("" = keep), failure event ("" = none),
--       queue wake channel, timeline wake channel
-- Returns {"changed", current schedule or false} when the schedule is not the one the
-- caller decided on (the caller decides again), {"stale"} when another worker holds the
-- job, else {result}.
local k = job_keys()
k.failures = KEYS[7]
k.leases = KEYS[8]
local jobid, tag, expected, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local action, due, now = ARGV[5], ARGV[6], ARGV[7]
local store, failure = ARGV[8], ARGV[9]
local lease = redis.call("GET", k.lease)
if lease ~= tag then
  if lease or redis.call("SISMEMBER", k.members, jobid) == 1
      or redis.call("ZSCORE", k.timeline, jobid) then
    return {"stale"}
  end
end
local current = redis.call("HGET", k.schedules, jobid)
if mode ~= "unset" and (current or "\0") ~= expected then
  return {"changed", current}
end
if lease == tag then
  redis.call("DEL", k.lease)
end
redis.call("ZREM", k.leases, jobid)
if failure ~= "" then
  redis.call("HSET", k.failures, jobid, failure .. ":" .. now)
  set_status(k.statuses, jobid, failure, now)
end
if store ~= "" then
  redis.call("HSET", k.schedules, jobid, store)
end
if mode == "unset" then
  redis.call("HDEL", k.schedules, jobid)
  redis.call("HDEL", k.statuses, jobid)
  redis.call("HDEL", k.failures, jobid)
  redis.call("ZREM", k.timeline, jobid)
  dequeue(k.queue, k.members, jobid)
  return {"unset"}
elseif mode == "hold" then
  return {"held"}
elseif mode == "bad" then
  set_status(k.statuses, jobid, "BAD", now)
  return {"bad"}
end
if action == "stop" then
  -- The schedule ends here; a run someone placed while this one ran is kept, and a
  -- failure stays the visible status.
  if failure == "" then
    set_status(k.statuses, jobid, "STP", now)
  end
  return {"stopped"}
end
local result = place(k, jobid, action, due, now, ARGV[10], ARGV[11])
if failure ~= "" then
  -- Keep the failure visible in the status until the next step of the job.
  set_status(k.statuses, jobid, failure, now)
end
return {result}
