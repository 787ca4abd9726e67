-- release: hand back a job this worker claimed ahead but never started (it is
-- stopping, or held the job longer than it may). The job goes back to the head of its
-- queue (RPUSH: the next RPOP takes it), so it keeps its turn; as if never claimed.
-- KEYS: schedules, statuses, timeline, queue, members, lease, leases
-- ARGV: jobid, tag, now, queue wake channel
-- Returns "released", "stale" (not ours: leave the job alone), "placed"
-- (set while held: it is where that set put it), "stopped" (set to STOP while held)
-- or "gone" (unset while held).
local k = job_keys()
local jobid, tag, now = ARGV[1], ARGV[2], ARGV[3]
local bad = wrong_job_type(k, {KEYS[7], "zset"})
if bad then
  return bad
end
local lease = redis.call("GET", k.lease)
if lease ~= tag then
  -- Another worker's lease, or the job was placed anew: not ours to touch. (A lease
  -- that merely expired, with the job nowhere else, still puts it back.)
  if lease or redis.call("SISMEMBER", k.members, jobid) == 1
      or redis.call("ZSCORE", k.timeline, jobid) then
    return "stale"
  end
end
redis.call("DEL", k.lease)
redis.call("ZREM", KEYS[7], jobid)
local schedule = redis.call("HGET", k.schedules, jobid)
if not schedule then
  return "gone"
end
if redis.call("SISMEMBER", k.members, jobid) == 1
    or redis.call("ZSCORE", k.timeline, jobid) then
  return "placed"
end
if string.sub(redis.call("HGET", k.statuses, jobid) or "", 1, 4) == "STP:" then
  -- `set JOB STOP` while held (the claim wrote WRK, the set STP): it stopped, as it
  -- would have in its queue.
  return "stopped"
end
if schedule == "NOW" then
  -- A `set NOW` made while the job was held asked for one run: this queueing is it.
  redis.call("HSET", k.schedules, jobid, "STOP")
end
redis.call("RPUSH", k.queue, jobid)
redis.call("SADD", k.members, jobid)
set_status(k.statuses, jobid, "ENQ", now)
redis.call("PUBLISH", ARGV[4], "1")
return "released"
