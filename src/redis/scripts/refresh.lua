-- refresh: a worker confirms that its jobs still run: pushes the recovery instant of
-- each forward to Redis's clock plus the delay (XX: never re-adds a job that was
-- finished or recovered meanwhile).
-- KEYS: leases, schedules
-- ARGV: delay in seconds, then the job ids
-- Returns the ids that were no longer in the index: recovered, so their runs must stop;
-- then 1 when some were and the index and the schedules hash are gone too (Redis came
-- back empty?).
local bad = wrong_type({KEYS[1], "zset"}) or bad_number(ARGV[1], 0, MAX_TTL, "recovery delay")
if bad then
  return bad
end
local at = redis_time() + tonumber(ARGV[1])
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
return {missing, gone}
