-- finish: record the outcomes of a batch of runs and put each job back per its
-- schedule, atomically. Only the lease holder reschedules (as in the original), so an
-- unset or set made while the job ran wins; but a job whose lease merely expired, and
-- that is nowhere else, is still put back so that it never falls out of circulation.
-- One call per round trip, whatever the number of jobs: a script call has a cost of
-- its own (arguments, the helpers of common.lua), paid once here. Likewise the leases
-- and schedules are read, and the leases, the running index and the statuses written,
-- in one call each for the batch. (The jobs of a batch are distinct: a worker writes
-- the outcome of a claim before it can claim that job again.)
-- KEYS: schedules, statuses, timeline, failures, leases, then per job: queue,
--       members, lease
-- ARGV per job (11 each): jobid, tag, expected schedule ("\0" = none), mode
--       (place|unset|hold|bad), action, due, now, schedule to store ("" = keep),
--       failure event ("" = none), queue wake channel, timeline wake channel
-- Returns one reply per job: {"changed", current schedule or false} when the schedule
-- is not the one the caller decided on (the caller decides again), {"stale"} when
-- another worker holds the job, else {result}.
local gone, done = {}, {}
local function finish(k, lease, current, jobid, tag, expected, mode, action, due, now,
                      store, failure, queue_wake, timeline_wake)
  if lease ~= tag then
    if lease or redis.call("SISMEMBER", k.members, jobid) == 1
        or redis.call("ZSCORE", k.timeline, jobid) then
      return {"stale"}
    end
  end
  if mode ~= "unset" and (current or "\0") ~= expected then
    return {"changed", current}
  end
  -- From here on the job has no lease (ours goes in the DEL at the end).
  if lease == tag then
    gone[#gone + 1] = k.lease
  end
  k.lease_gone = true
  done[#done + 1] = jobid
  if mode == "unset" then
    redis.call("HDEL", k.schedules, jobid)
    redis.call("HDEL", k.statuses, jobid)
    redis.call("HDEL", k.failures, jobid)
    redis.call("ZREM", k.timeline, jobid)
    dequeue(k.queue, k.members, jobid)
    return {"unset"}
  end
  if failure ~= "" then
    redis.call("HSET", k.failures, jobid, failure .. ":" .. now)
    set_status(k.statuses, jobid, failure, now)
  end
  if store ~= "" then
    redis.call("HSET", k.schedules, jobid, store)
  end
  if mode == "hold" then
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
  local result = place(k, jobid, action, due, now, queue_wake, timeline_wake)
  if failure ~= "" then
    -- Keep the failure visible in the status until the next step of the job.
    set_status(k.statuses, jobid, failure, now)
  end
  return {result}
end

local jobs = (#KEYS - 5) / 3
local lease_keys, ids = {}, {}
for i = 1, jobs do
  lease_keys[i] = KEYS[5 + 3 * i]
  ids[i] = ARGV[11 * i - 10]
end
local leases = chunked({"MGET"}, lease_keys)
local schedules = chunked({"HMGET", KEYS[1]}, ids)
deferred_statuses = {}
local out = {}
for i = 0, jobs - 1 do
  local k = {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
             failures = KEYS[4], leases = KEYS[5], queue = KEYS[6 + 3 * i],
             members = KEYS[7 + 3 * i], lease = KEYS[8 + 3 * i]}
  local a = 11 * i
  out[#out + 1] = finish(k, leases[i + 1], schedules[i + 1], ARGV[a + 1], ARGV[a + 2],
    ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8],
    ARGV[a + 9], ARGV[a + 10], ARGV[a + 11])
end
chunked({"DEL"}, gone)
chunked({"ZREM", KEYS[5]}, done)
flush_statuses(KEYS[2])
return out
