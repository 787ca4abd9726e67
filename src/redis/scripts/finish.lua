-- finish: record the outcomes of a batch of runs and put each job back per its
-- schedule, atomically. Only the lease holder reschedules (as in the original), so an
-- unset or set made while the job ran wins; but a job whose lease merely expired, and
-- that is nowhere else, is still put back so that it never falls out of circulation.
-- One call per round trip, whatever the number of jobs: a script call has a cost of
-- its own (arguments, the helpers of common.lua), paid once here. Likewise, from
-- BATCH_FROM jobs, the leases and schedules are read, and the leases, the running
-- index, the schedules and the statuses written, in one call each for the batch; each
-- wake channel is published to once. (The jobs of a batch are distinct: a worker
-- writes the outcome of a claim before it can claim that job again.)
-- KEYS: schedules, statuses, timeline, failures, leases, then per job: queue,
--       members, lease
-- ARGV per job (11 each): jobid, tag, expected schedule ("\0" = none), mode
--       (place|unset|hold|bad), action (enqueue|timeline|stop, or oneoff: a STOP
--       schedule whose run did not end by itself, see oneoff_action), due, now,
--       schedule to store ("" = keep), failure event ("" = none), queue wake channel,
--       timeline wake channel
-- Returns one reply per job: {"changed", current schedule or false} when the schedule
-- is not the one the caller decided on (the caller decides again), {"stale"} when
-- another worker holds the job, {"odd", error} when its queue's keys hold other types
-- (nothing is written for it; the other jobs are recorded), else {result}.

local jobs = (#KEYS - 5) / 3
local batch = jobs >= BATCH_FROM
-- In a batch, written at the end in one call each: leases to delete, jobs leaving the
-- running index, schedules to store. Wake-ups are published once per channel.
local gone, done, stores = nil, nil, nil
if batch then
  gone, done, stores = {}, {}, {}
end
local woken, wake_order, first_due = nil, nil, nil

-- Notes a wake-up to publish at the end: once per channel, with its last payload.
local function wake(channel, payload)
  if channel == "" then
    return
  end
  -- Made on first use: most batches wake nothing (tables cost more than calls here).
  woken, wake_order = woken or {}, wake_order or {}
  if not woken[channel] then
    wake_order[#wake_order + 1] = channel
  end
  woken[channel] = payload
end

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
  if action == "oneoff" then
    action = oneoff_action(k.statuses, jobid)
  end
  -- From here on the job has no lease (in a batch, ours goes in the DEL at the end).
  if lease == tag then
    later(gone, "DEL", false, k.lease)
  end
  k.lease_gone = true
  later(done, "ZREM", k.leases, jobid)
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
    later(stores, "HSET", k.schedules, jobid, store)
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
  local result = place(k, jobid, action, due, now, "", "")
  if result == "enqueued" then
    wake(queue_wake, "1")
  elseif result == "timeline" then
    -- A dispatcher acts on the earliest due time only.
    first_due = math.min(first_due or tonumber(due), tonumber(due))
    wake(timeline_wake, string.format("%d", first_due))
  end
  if failure ~= "" then
    -- Keep the failure visible in the status until the next step of the job.
    set_status(k.statuses, jobid, failure, now)
  end
  return {result}
end

-- Everything that could fail, for every job, before the first write. (Leases are read
-- with MGET, which takes a key of any type: only the holder of a lease deletes it.)
-- A job whose queue's keys hold other types is skipped, not the whole batch: one odd
-- key must not keep a worker from recording every other outcome.
local seen = {}
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset", KEYS[4], "hash",
  KEYS[5], "zset"}, seen)
local odd = {}
for i = 0, jobs - 1 do
  bad = bad or (ARGV[11 * i + 5] == "timeline"
    and bad_number(ARGV[11 * i + 6], 0, MAX_UNIX, "due time"))
  odd[i + 1] = wrong_type({KEYS[6 + 3 * i], "list", KEYS[7 + 3 * i], "set"}, seen)
end
if bad then
  return bad
end

-- A batch reads all leases and schedules up front, in one call each.
local leases, schedules = nil, nil
if batch then
  local lease_keys, ids = {}, {}
  for i = 1, jobs do
    lease_keys[i] = KEYS[5 + 3 * i]
    ids[i] = ARGV[11 * i - 10]
  end
  leases = chunked("MGET", false, lease_keys)
  schedules = chunked("HMGET", KEYS[1], ids)
end
deferred_statuses = batch and {} or nil
local out = {}
-- One table of keys for all jobs (a table per job costs more than the rest of a job).
local k = {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
           failures = KEYS[4], leases = KEYS[5]}
for i = 0, jobs - 1 do
  k.queue, k.members, k.lease = KEYS[6 + 3 * i], KEYS[7 + 3 * i], KEYS[8 + 3 * i]
  k.lease_gone = false
  local a = 11 * i
  if odd[i + 1] then
    out[i + 1] = {"odd", odd[i + 1].err}
  else
    local lease, current
    if batch then
      lease, current = leases[i + 1], schedules[i + 1]
    else
      lease = redis.call("MGET", k.lease)[1]
      current = redis.call("HGET", k.schedules, ARGV[a + 1])
    end
    out[i + 1] = finish(k, lease, current, ARGV[a + 1], ARGV[a + 2],
      ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8],
      ARGV[a + 9], ARGV[a + 10], ARGV[a + 11])
  end
end
if batch then
  chunked("DEL", false, gone)
  chunked("ZREM", KEYS[5], done)
  chunked("HSET", KEYS[1], stores)
  flush_statuses(KEYS[2])
end
for _, channel in ipairs(wake_order or {}) do
  redis.call("PUBLISH", channel, woken[channel])
end
return out
