-- shards: the number of shards a prefix is split into (`shards` in the config), kept in
-- the unsplit prefix's key `P-shards` so that processes configured with another number
-- refuse to run rather than look for jobs in the wrong shard. A process with
-- shards > 1 records its number when none is recorded and the unsplit prefix holds no
-- schedule (its jobs would be left behind); a process with shards = 1 never writes.
-- KEYS: the marker P-shards, the unsplit prefix's schedules
-- ARGV: the shards this process is configured with
-- Returns the number recorded ("1" when none is), or "unsplit:N" when the unsplit
-- prefix holds N schedules and none is recorded.
local marker, schedules = KEYS[1], KEYS[2]
local bad = wrong_type({marker, "string", schedules, "hash"})
  or bad_number(ARGV[1], 1, 1024, "shards")
if bad then
  return bad
end
local recorded = redis.call("GET", marker)
if recorded then
  return recorded
end
if ARGV[1] == "1" then
  return "1"
end
local held = redis.call("HLEN", schedules)
if held > 0 then
  return "unsplit:" .. held
end
redis.call("SET", marker, ARGV[1])
return ARGV[1]
