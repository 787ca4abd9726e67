-- claim: pop up to `n` jobs, walking the queue cycle (the original's round-robin
-- weighting, e.g. A:A:B) from `cursor`, and lease each one in the same atomic step, so
-- a job is always either queued or leased, never lost in between.
-- Each claimed job also enters the running index (leases), scored by when it is to be
-- recovered unless its worker refreshes it.
-- Consecutive positions of the cycle on one queue are one pop; in a batch of
-- BATCH_FROM jobs or more, only the lease is a call of its own per job.
-- KEYS: statuses, schedules, leases, then per distinct queue ("pair"): its list, its
--       members set, and the lease key of the job named as the queue (a job id without
--       ':'), which is checked, with all the others, before the first write
-- ARGV: now, n, cursor (0-based), cycle (comma-separated 1-based pair numbers),
--       recover-after time, then one lease TTL per pair, then n lease tags
-- Returns {next cursor, jobid1, schedule1 or false, pair1, jobid2, ...}
local now, n, cursor = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cycle = {}
for p in string.gmatch(ARGV[4], "[^,]+") do
  cycle[#cycle + 1] = tonumber(p)
end
local pairs_count = (#KEYS - 3) / 3
local recover_at = ARGV[5]
local checks = {KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset"}
for i = 4, #KEYS, 3 do
  for _, v in ipairs({KEYS[i], "list", KEYS[i + 1], "set", KEYS[i + 2], "string"}) do
    checks[#checks + 1] = v
  end
end
local bad = wrong_type(checks) or bad_number(recover_at, 0, MAX_UNIX, "recovery time")
for pair = 1, pairs_count do
  bad = bad or bad_number(ARGV[5 + pair], 1, MAX_TTL, "lease time")
end
if bad then
  return bad
end
-- A batch's members-set removals, running index entries, statuses and schedule reads
-- are one call each (their lists, made only then: popped[pair], indexed, ids).
local batch = n >= BATCH_FROM
deferred_statuses = batch and {} or nil
local out, popped = {false}, {}
local indexed, ids = batch and {} or nil, batch and {} or nil
local taken, misses = 0, 0

while taken < n and misses < #cycle do
  local pair = cycle[cursor % #cycle + 1]
  -- The positions of the cycle from here that name this same queue (all of them for
  -- a single queue), up to the jobs still wanted: one pop serves them all.
  local run = 1
  while run < n - taken and cycle[(cursor + run) % #cycle + 1] == pair do
    run = run + 1
  end
  cursor = cursor + run
  local queue = KEYS[1 + 3 * pair]
  local jobs = redis.call("RPOP", queue, run) or {}
  if batch then
    popped[pair] = popped[pair] or {}
  end
  for _, jobid in ipairs(jobs) do
    taken = taken + 1
    redis.call("SET", queue .. "-" .. jobid, ARGV[5 + pairs_count + taken], "EX",
      ARGV[5 + pair])
    later(popped[pair], "SREM", KEYS[2 + 3 * pair], jobid)
    later(indexed, "ZADD", KEYS[3], recover_at, jobid)
    set_status(KEYS[1], jobid, "WRK", now)
    out[3 * taken - 1] = jobid
    if batch then
      ids[taken] = jobid
      out[3 * taken] = false -- its schedule, read below for the whole batch
    else
      out[3 * taken] = redis.call("HGET", KEYS[2], jobid)
    end
    out[3 * taken + 1] = pair
  end
  -- Misses: the positions since the last job taken (the queue is empty after a
  -- short pop). A whole cycle of them and every queue is empty.
  if #jobs > 0 then
    misses = run - #jobs
  else
    misses = misses + run
  end
end
if batch and taken > 0 then
  for pair = 1, pairs_count do
    if popped[pair] then
      chunked("SREM", KEYS[2 + 3 * pair], popped[pair])
    end
  end
  chunked("ZADD", KEYS[3], indexed)
  flush_statuses(KEYS[1])
  for i, schedule in ipairs(chunked("HMGET", KEYS[2], ids)) do
    out[3 * i] = schedule
  end
end
out[1] = cursor % #cycle
return out
