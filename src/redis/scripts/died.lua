-- died: a worker died (its guard saw it go, and has SIGKILLed its running jobs'
-- process groups): its entries in the running index fall due for recovery now instead
-- of after its fencing interval, so that a dispatcher puts its jobs back within a pass.
-- A job is the dead worker's while its lease holds a tag that starts with the worker's
-- 14 hex digits (claim.lua: the same for every run of one worker process, then the
-- run's fencing token); a job claimed since by another worker is left alone.
-- Pages through the entries not yet due (score above Redis's clock); an entry marked
-- leaves that range, so the next page's offset counts only the entries left.
-- KEYS: leases (the running index)
-- ARGV: prefix, the worker's tag, timeline wake channel, offset, page size
-- Returns {entries marked, entries looked at}.
local leases = KEYS[1]
local bad = wrong_type({leases, "zset"})
  or bad_number(ARGV[4], 0, 2 ^ 31, "offset")
  or bad_number(ARGV[5], 1, 10000, "page size")
if bad then
  return bad
end
local now = redis_time()
local ids = redis.call("ZRANGEBYSCORE", leases, "(" .. string.format("%.6f", now), "+inf",
  "LIMIT", tonumber(ARGV[4]), tonumber(ARGV[5]))
local tag, marked = ARGV[2], 0
for _, jobid in ipairs(ids) do
  local queue = ARGV[1] .. "-work-" .. string.match(jobid, "([^:]*)$")
  -- A lease key of another type is no lease of the dead worker's.
  local lease = redis.pcall("GET", queue .. "-" .. jobid)
  if type(lease) == "string" and string.sub(lease, 1, #tag) == tag then
    redis.call("ZADD", leases, "XX", now, jobid)
    marked = marked + 1
  end
end
if marked > 0 then
  redis.call("PUBLISH", ARGV[3], math.floor(now))
end
return {marked, #ids}
