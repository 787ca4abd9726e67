-- claim: pop up to `n` jobs, walking the queue cycle (the original's round-robin
-- weighting, e.g. A:A:B) from `cursor`, and lease each one in the same atomic step, so
-- a job is always either queued or leased, never lost in between.
-- Each claimed job also enters the running index (leases), scored by when it is to be
-- recovered unless its worker refreshes it: Redis's clock plus the given delay.
-- Each run gets a fencing token from the counter `fencing` (increasing across all
-- runs, so per job too), never below Redis's clock in microseconds: a counter that
-- Redis lost (restarted empty, or failed over without its last writes) starts again
-- above every token given before it, unless Redis's clock went back meanwhile. The
-- clock fits the 16 digits until the year 2286. Its lease tag is the worker's 14 random hex digits followed
-- by the token in 16 decimal digits: still the 30 hex digits the original writes and
-- compares, and whoever reads the lease can tell which run holds it.
-- Consecutive positions of the cycle on one queue are one pop; in a batch of
-- BATCH_FROM jobs or more, only the lease is a call of its own per job.
-- Each job's status before this claim and its due field are read too (see
-- crate::history::due_at: when the run was due, `REDBIKE_DUE`); a due key that is not
-- a hash (missing, or of another type) is not read. So is its field in `attempts`
-- (crate::retries: which attempt the run is), only while that key exists.
-- A queue with a fleet-wide limit ([redbike.limits], see crate::work::claim) claims at
-- most what its limit leaves: its jobs leased now are counted from the running index
-- (the leases sorted set), in one pass, only when the cycle holds a limited queue. The
-- rest wait in their queue, in order.
-- KEYS: statuses, schedules, leases, fencing, due, paused, paused-queues, rerun,
--       attempts, then
--       per distinct queue ("pair"): its list, its members set, and the lease key of
--       the job named as the queue (a job id without ':'), which is checked, with all
--       the others, before the first write
-- ARGV: now, n, cursor (0-based), cycle (comma-separated 1-based pair numbers),
--       recover-after delay (seconds), the worker's tag (the first 14 hex digits of
--       each lease tag), then one lease TTL per pair, then one queue name per pair,
--       then one limit per pair (0: none)
-- A queue whose keys hold other types is skipped (its positions in the cycle claim
-- nothing), as dispatch.lua does: the other queues go on. A paused queue (`pause
-- --queue`) claims nothing either, without being reported. A paused job popped (a
-- Python process queued it) is dropped from its queue with status PAU instead of
-- leased, unless `redbike run` asked for a run of it (a `rerun` marker).
-- Returns {next cursor, token of the first job (the others follow in order, +1 each)
--          or false, {pair, error, ...} of the queues skipped, Redis's clock (seconds,
--          as a string: the runs' start for finish.lua), jobid1, schedule1 or false,
--          pair1, status1 or false, due field1 or false, attempts field1 or false,
--          jobid2, ...}
local now, n, cursor = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cycle = {}
for p in string.gmatch(ARGV[4], "[^,]+") do
  cycle[#cycle + 1] = tonumber(p)
end
-- The one place that knows the layout of KEYS and ARGV, and of the reply per job.
local FIXED_KEYS, FIXED_ARGS, OUT = 9, 6, 6
local pairs_count = (#KEYS - FIXED_KEYS) / 3
local due_key, paused_key, paused_queues_key, rerun_key, attempts_key =
  KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
-- The `t`th job claimed has the fields b + 1 .. b + OUT of the reply, b = OUT * (t - 1)
-- + 4: 1 job id, 2 schedule, 3 pair, 4 status, 5 due, 6 attempts. (Worked out in
-- place, not by a helper: a Lua function call costs Redis as much as a dozen table
-- writes, and this is the per-job path.)
-- An INCRBY failing after a pop would lose the popped job: the counter must hold a
-- whole number well below 2^53 (or be missing). The pauses, markers and fields looked
-- up below are mostly all missing: one EXISTS says so (wrong_type_rare).
local seen = {}
-- (GET is also the check of the counter's type: it fails on a key of another type.)
local counter = redis.pcall("GET", KEYS[4])
local bad = (type(counter) == "table" and wrong_type({KEYS[4], "string"}))
  or wrong_type({KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset"}, seen)
  or wrong_type_rare({paused_key, "hash", paused_queues_key, "hash", rerun_key, "hash",
    attempts_key, "hash", due_key, "any"}, seen)
  or bad_number(ARGV[5], 0, MAX_TTL, "recovery delay")
  or bad_number(counter or 0, 0, 2 ^ 52, "fencing token counter")
-- Each queue's length (LLEN is also the check of its type), read before the first pop.
local odd, skipped, lengths = {}, {}, {}
for pair = 1, pairs_count do
  bad = bad or bad_number(ARGV[FIXED_ARGS + pair], 1, MAX_TTL, "lease time")
    or bad_number(ARGV[FIXED_ARGS + 2 * pairs_count + pair], 0, 1000000, "queue limit")
  local i = FIXED_KEYS - 2 + 3 * pair
  local length = redis.pcall("LLEN", KEYS[i])
  local e
  if type(length) == "number" then
    lengths[pair] = length
    e = wrong_type({KEYS[i + 1], "set", KEYS[i + 2], "string"})
  else
    e = wrong_type({KEYS[i], "list"})
  end
  if e then
    odd[pair] = true
    skipped[#skipped + 1] = pair
    skipped[#skipped + 1] = e.err
  end
end
if bad then
  return bad
end
local clock = redis_time()
-- Whole seconds: a sorted set small enough to be a listpack keeps integer scores as
-- integers, and compares them without parsing each member's score as a string (a
-- fractional score made each claim's ZADD several times dearer). A string: made once,
-- not for each job's ZADD.
local recover_at = string.format("%d", math.ceil(clock + tonumber(ARGV[5])))
-- Nothing to read while no dispatcher wrote a due field (the key is missing), nor
-- while no job waits for a retry.
local read_due = seen[due_key] == "hash"
local read_attempts = seen[attempts_key] == "hash"
-- Paused queues claim nothing (one call for all of them); paused jobs are looked up
-- only while some job is paused.
local names = {}
for pair = 1, pairs_count do
  names[pair] = ARGV[FIXED_ARGS + pairs_count + pair]
end
local held = {}
if seen[paused_queues_key] == "hash" then
  held = redis.call("HMGET", paused_queues_key, unpack(names))
end
local any_paused = seen[paused_key] == "hash"
-- The room a limited queue has left: its limit less its jobs leased now (the part of
-- each running job's id after the last ':', or the whole id, names its queue).
local room, limited = {}, {}
for pair = 1, pairs_count do
  local limit = tonumber(ARGV[FIXED_ARGS + 2 * pairs_count + pair])
  if limit > 0 then
    room[pair] = limit
    limited[names[pair]] = pair
  end
end
if next(limited) then
  for _, jobid in ipairs(redis.call("ZRANGE", KEYS[3], 0, -1)) do
    local pair = limited[string.match(jobid, ":([^:]*)$") or jobid]
    if pair then
      room[pair] = room[pair] - 1
    end
  end
end
-- Tokens are taken for all `n` before the first pop: one call; unused ones are
-- skipped. The counter is first raised to Redis's clock in microseconds (see above).
local first_token = false
local function take_tokens()
  counter = tonumber(counter or 0)
  local floor = math.floor(clock * 1000000)
  if counter < floor then
    return redis.call("INCRBY", KEYS[4], floor - counter + n) - n + 1
  end
  return redis.call("INCRBY", KEYS[4], n) - n + 1
end
-- A batch's members-set removals, running index entries, statuses and schedule reads
-- are one call each (their lists, made only then: popped[pair], indexed, ids).
local batch = n >= BATCH_FROM
deferred_statuses = batch and {} or nil
-- The WRK status of every job this call claims (a batch's are written in one HSET at
-- the end: one string for them all).
local working = "WRK:" .. now
local out, popped = {false, false, skipped, string.format("%.6f", clock)}, {}
local indexed, ids = batch and {} or nil, batch and {} or nil
local taken, misses = 0, 0

while taken < n and misses < #cycle do
  local pair = cycle[cursor % #cycle + 1]
  -- The positions of the cycle from here that name this same queue (all of them for
  -- a single queue), up to the jobs still wanted: one pop serves them all.
  local run = 1
  if #cycle == 1 then
    run = math.max(1, n - taken)
  end
  while run < n - taken and cycle[(cursor + run) % #cycle + 1] == pair do
    run = run + 1
  end
  cursor = cursor + run
  local queue = KEYS[FIXED_KEYS - 2 + 3 * pair]
  local want = run
  if room[pair] then
    want = math.max(0, math.min(run, room[pair]))
  end
  local open = not odd[pair] and not held[pair] and want > 0
  -- The tokens are taken before the first pop: INCRBY is the call's first write, and
  -- Redis refuses it at maxmemory (OOM) where it lets a pop through, so a Redis out of
  -- memory fails the whole claim before anything is written, rather than hand out
  -- jobs whose leases and outcomes it then cannot write.
  if open and not first_token and lengths[pair] > 0 then
    first_token = take_tokens()
  end
  local jobs = (open and redis.call("RPOP", queue, want)) or {}
  local got = #jobs
  if any_paused and got > 0 then
    local kept = {}
    for _, jobid in ipairs(jobs) do
      if redis.call("HEXISTS", paused_key, jobid) == 1
          and redis.call("HEXISTS", rerun_key, jobid) == 0 then
        redis.call("SREM", KEYS[FIXED_KEYS - 1 + 3 * pair], jobid)
        set_status(KEYS[1], jobid, "PAU", now)
      else
        kept[#kept + 1] = jobid
      end
    end
    jobs = kept
  end
  if room[pair] then
    room[pair] = room[pair] - #jobs
  end
  if batch then
    popped[pair] = popped[pair] or {}
  end
  for _, jobid in ipairs(jobs) do
    taken = taken + 1
    local b = OUT * (taken - 1) + 4
    redis.call("SET", queue .. "-" .. jobid, string.format("%s%016d", ARGV[6],
      first_token + taken - 1),
      "EX", ARGV[FIXED_ARGS + pair])
    out[b + 1] = jobid
    if batch then
      -- Its schedule, status, due and attempts fields are read below for the whole
      -- batch; its removal from the members set, running index entry and WRK status
      -- written there too.
      out[b + 2], out[b + 3], out[b + 4], out[b + 5], out[b + 6] =
        false, pair, false, false, false
      ids[taken] = jobid
      local removed = popped[pair]
      removed[#removed + 1] = jobid
      indexed[2 * taken - 1], indexed[2 * taken] = recover_at, jobid
      local d = deferred_statuses -- (after any PAU statuses of this batch)
      local m = #d
      d[m + 1], d[m + 2] = jobid, working
    else
      redis.call("SREM", KEYS[FIXED_KEYS - 1 + 3 * pair], jobid)
      redis.call("ZADD", KEYS[3], recover_at, jobid)
      out[b + 2] = redis.call("HGET", KEYS[2], jobid)
      out[b + 3] = pair
      out[b + 4] = redis.call("HGET", KEYS[1], jobid)
      out[b + 5] = read_due and redis.call("HGET", due_key, jobid) or false
      out[b + 6] = read_attempts and redis.call("HGET", attempts_key, jobid) or false
      set_status(KEYS[1], jobid, "WRK", now)
    end
  end
  -- Misses: the positions since the last job taken (the queue is empty after a
  -- short pop). A whole cycle of them and every queue is empty.
  if got > 0 then
    misses = run - got
  else
    misses = misses + run
  end
end
if batch and taken > 0 then
  for pair = 1, pairs_count do
    if popped[pair] then
      chunked("SREM", KEYS[FIXED_KEYS - 1 + 3 * pair], popped[pair])
    end
  end
  chunked("ZADD", KEYS[3], indexed)
  -- Before the WRK statuses are written over them.
  local statuses = chunked("HMGET", KEYS[1], ids)
  local dues = read_due and chunked("HMGET", due_key, ids)
  local attempts = read_attempts and chunked("HMGET", attempts_key, ids)
  flush_statuses(KEYS[1])
  local schedules = chunked("HMGET", KEYS[2], ids)
  for i = 1, taken do
    local b = OUT * (i - 1) + 4
    out[b + 2], out[b + 4] = schedules[i], statuses[i]
    if dues then
      out[b + 5] = dues[i]
    end
    if attempts then
      out[b + 6] = attempts[i]
    end
  end
end
if taken > 0 then
  keep_skiplist(KEYS[3], seen[KEYS[3]])
end
out[1] = cursor % #cycle
out[2] = first_token
return out
