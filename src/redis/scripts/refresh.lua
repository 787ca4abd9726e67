-- refresh: a worker confirms that its jobs still run: pushes the recovery instant of
-- each forward to Redis's clock plus the delay (XX: never re-adds a job that was
-- finished or recovered meanwhile). It also reads the kill markers of those jobs
-- (`redbike kill`, see kill.lua), when any exist: a worker whose listener missed the
-- message still stops the run.
-- KEYS: leases, schedules, kill
-- ARGV: delay in seconds, then the job ids
-- Returns {the ids that were no longer in the index: recovered, so their runs must
-- stop; 1 when some were and the index and the schedules hash are gone too (Redis came
-- back empty?), else 0; {jobid, tag, ...} of the kill markers of these jobs}.
local bad = wrong_type({KEYS[1], "zset"}) or bad_number(ARGV[1], 0, MAX_TTL, "recovery delay")
if bad then
  return bad
end
-- Whole seconds, as claim.lua writes them (see there).
local at = math.ceil(redis_time() + tonumber(ARGV[1]))
local ids, args, missing = {}, {}, {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
local scores = chunked("ZMSCORE", KEYS[1], ids) or {}
for i, id in ipairs(ids) do
  if scores[i] then
    args[#args + 1] = at
    args[#args + 1] = id
  else
    missing[#missing + 1] = id
  end
end
if #args > 0 then
  chunked("ZADD", KEYS[1], args)
end
local gone = (#missing > 0 and redis.call("EXISTS", KEYS[1], KEYS[2]) == 0) and 1 or 0
-- Another type under the name (check names it) is no reason to stop confirming.
local kills = {}
if redis.call("TYPE", KEYS[3])["ok"] == "hash" then
  local tags = chunked("HMGET", KEYS[3], ids) or {}
  for i, id in ipairs(ids) do
    if tags[i] then
      kills[#kills + 1] = id
      kills[#kills + 1] = tags[i]
    end
  end
end
return {missing, gone, kills}
